"""The route a run takes: the committed lockfile by default, the lab's when it fits, resolving (and
why) when none fits. The route is the plan's: `plan` shows it, the run's report and the env's
record are made from the same plan (checked here from the plan, as the run would record it).
Two real installs from the real index and pip settings prove what no plan can: an env from the
committed lockfile (queued behind another process holding the prefix lock, with --wait) and an
env that resolved (another verl ref, from the local stand-in repo made from verl's sdists) each
record their route, and info and `verify --against` read it back."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from lockfixtures import make_lock
from packaging.version import Version
from prefixholder import Holder, released_at
from scaffold import run_tool

from verl_bootstrap.cli.optionsbuilder import run_options
from verl_bootstrap.cli.parse import build_parser
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.machine.host.interpreters import interpreter_for, interpreter_version
from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.state.envrecord import record_of
from verl_bootstrap.siteconfig.apply import applied_environment

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
COMMITTED_LINE = (
    "from lockfile lockfiles/cpu/cpu-linux-64.lock.yaml (locked 2026-12-01, every artifact "
    "hash-checked)"
)


cli = functools.partial(run_tool, timeout=1800)  # resolving installs run long


def first_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()[0]


def record(prefix: Path) -> dict[str, object]:
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text())
    return dict(state["record"])


def planned(*args: str | Path) -> Plan:
    """The plan `verl-bootstrap plan ARGS` shows, in this process (the run and its record are
    made from this same plan)."""
    ns = build_parser("plan").parse_args(["plan", *map(str, args)])
    options = run_options(ns)
    with applied_environment(dict(options.site.environment)):
        return prepare_plan(options)


def plan_route(*args: str | Path) -> dict[str, object]:
    """The route `plan --json ARGS` shows (the run's report shows the same: route_json)."""
    done = cli("plan", *args, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout)["route"])


Committed = tuple[Path, subprocess.CompletedProcess[str], float]


@pytest.fixture(scope="module")
def committed_env(tmp_path_factory: pytest.TempPathFactory) -> Committed:
    """A fresh `verl-bootstrap --profile cpu`, as on a fresh clone (no flag but where, and --wait:
    another real process holds the prefix lock when it starts, and lets it go 2 s later).

    One of the two real installs here: a plan cannot show that the run says its route first,
    that the env records its lockfile for info and `verify --against`, nor that a run queued with
    --wait runs every step once the other process is done."""
    prefix = tmp_path_factory.mktemp("route") / "cpu"
    holder = Holder(prefix)
    try:
        child = holder.start(2)
        done = cli("--profile", "cpu", "--prefix", prefix, "--json", "--wait", "300")
        return prefix, done, released_at(child)
    finally:
        holder.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path) -> Path:
    """A lab's lockfiles folder holding a git lock of the cpu profile (verl from the local repo),
    and a site config naming it."""
    base = tmp_path_factory.mktemp("lab")
    lock = make_lock(base, verl_repo_session, "lab-cpu")
    folder = base / "lockfiles" / "cpu"
    folder.mkdir(parents=True)
    shutil.copyfile(lock, folder / "cpu-linux-64.lock.yaml")
    (base / "site.yaml").write_text(
        yaml.safe_dump({"schema_version": 1, "lockfiles": str(base / "lockfiles")})
    )
    return base


@pytest.mark.real_slow  # the real install of the committed lockfile (committed_env)
def test_a_fresh_default_run_installs_the_committed_lockfile_and_says_so(
    committed_env: Committed,
) -> None:
    prefix, done, _ = committed_env
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[0] == COMMITTED_LINE  # the run's first line
    route = json.loads(done.stdout)["route"]
    assert route == {
        "kind": "lockfile",
        "line": COMMITTED_LINE,
        "lockfile": str(COMMITTED),
        "origin": "committed",
    }
    lock = record(prefix)["lockfile"]
    assert isinstance(lock, dict) and lock["path"] == str(COMMITTED)
    info = cli("info", "--prefix", prefix)
    assert f"from      lockfile {COMMITTED} (committed, hash-checked)" in info.stdout, info.stdout


@pytest.mark.real_slow  # the real install of the committed lockfile (committed_env)
def test_with_wait_a_run_queues_behind_the_holder_then_runs_every_step(
    committed_env: Committed,
) -> None:
    prefix, done, released = committed_env
    assert done.returncode == 0, done.stderr[-3000:]
    body = json.loads(done.stdout)
    assert body["ok"] is True
    assert {s["status"] for s in body["steps"]} == {"done"}
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text(encoding="utf-8"))
    first_start = min(record["started"] for record in state["steps"].values())
    assert first_start >= released  # nothing ran while the other process held the lock


@pytest.mark.real_slow  # the real install of the committed lockfile (committed_env)
def test_an_env_made_from_a_lockfile_verifies_against_it_by_default(
    committed_env: Committed,
) -> None:
    prefix, _, _ = committed_env
    done = cli("verify", "--prefix", prefix, "--against", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] and body["hashes_checked"] and body["lockfile"] == str(COMMITTED)
    assert body["differences"] == []


def test_the_labs_lockfile_wins_over_the_committed_one(
    lab: Path, verl_repo_session: Path, tmp_path: Path
) -> None:
    lock = lab / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
    args: list[str | Path] = ["--profile", "cpu", "--prefix", tmp_path / "env"]
    args += ["--verl-source", verl_repo_session, "--config", lab / "site.yaml"]
    route = plan_route(*args)
    assert route["kind"] == "lockfile" and route["origin"] == "lab"
    assert route["lockfile"] == str(lock) and str(route["line"]).startswith(
        f"from lockfile {lock} ("
    )
    # the env records the lab's lockfile: `verify --against` with no path checks the env against
    # it (as for the committed one: test_an_env_made_from_a_lockfile_verifies_against_it_by_default)
    made = record_of(planned(*args))
    assert made["route"] == route["line"] and made["lockfile"]["path"] == str(lock)


def test_locked_takes_the_labs_lockfile_records_it_and_leaves_the_options_as_given(
    lab: Path, verl_repo_session: Path, tmp_path: Path
) -> None:
    """The lockfile --locked chose lives in the plan (plan.choices), not in the user's options;
    the env's record still names it, so a resume with --locked installs that same file."""
    lock = lab / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
    args: list[str | Path] = ["--profile", "cpu", "--prefix", tmp_path / "env", "--locked"]
    plan = planned(*args, "--verl-source", verl_repo_session, "--config", lab / "site.yaml")
    assert plan.options.lockfile is None  # as the user gave it
    assert plan.locked is not None and plan.locked.origin == "lab" and plan.locked.path == lock
    made = record_of(plan)
    assert made["options"]["lockfile"] == str(lock) and made["lockfile"]["origin"] == "lab"


def test_a_lab_lockfile_whose_tag_moved_is_stale_and_never_used(
    lab: Path, verl_repo_session: Path, tmp_path: Path
) -> None:
    moved = tmp_path / "verl"
    subprocess.run(["git", "clone", "-q", str(verl_repo_session), str(moved)], check=True)
    (moved / "MOVED").write_text("the tag moved\n")
    for args in (["add", "MOVED"], ["commit", "-qm", "moved"], ["tag", "-f", "v0.9.1"]):
        subprocess.run(
            ["git", "-C", str(moved), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
        )
    plan = cli(
        "plan",
        "--profile",
        "cpu",
        "--prefix",
        tmp_path / "env",
        "--verl-source",
        moved,
        "--config",
        lab / "site.yaml",
    )
    line = first_line(plan)
    assert line.startswith("resolving: the lab lockfile "), line
    assert "is stale: v0.9.1 now names commit" in line


def test_a_lab_lockfile_for_a_python_this_host_lacks_gives_way_to_the_committed_one(
    lab: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "lockfiles" / "cpu"
    folder.mkdir(parents=True)
    text = (lab / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml").read_text()
    (folder / "cpu-linux-64.lock.yaml").write_text(text.replace("python: '3.11'", "python: '3.19'"))
    site = {"schema_version": 1, "lockfiles": str(tmp_path / "lockfiles")}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    plan = cli(
        "plan", "--profile", "cpu", "--prefix", tmp_path / "env", "--config", tmp_path / "site.yaml"
    )
    assert first_line(plan) == COMMITTED_LINE
    # the lab member is told why the lab's env is not the one installed
    notes = [line for line in plan.stdout.splitlines() if line.startswith("note: not the lab's")]
    assert notes == [
        f"note: not the lab's lockfile: the lab lockfile {folder / 'cpu-linux-64.lock.yaml'} "
        "locks Python 3.19; this run can use 3.11"
    ], plan.stdout


def test_a_lab_lockfiles_folder_that_is_not_there_is_named_not_passed_over_in_silence(
    tmp_path: Path,
) -> None:
    site = {"schema_version": 1, "lockfiles": str(tmp_path / "no-such-folder")}
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    plan = cli(
        "plan", "--profile", "cpu", "--prefix", tmp_path / "env", "--config", tmp_path / "site.yaml"
    )
    assert first_line(plan) == COMMITTED_LINE
    missing = tmp_path / "no-such-folder" / "cpu" / "cpu-linux-64.lock.yaml"
    assert f"note: not the lab's lockfile: no lab lockfile at {missing}" in plan.stdout
    # a lockfile the user names is theirs to choose: the lab's is not asked for
    named = cli(
        "plan",
        "--profile",
        "cpu",
        "--prefix",
        tmp_path / "env",
        "--config",
        tmp_path / "site.yaml",
        "--lockfile",
        COMMITTED,
    )
    assert named.returncode == 0, named.stderr[-3000:]
    assert "not the lab's lockfile" not in named.stdout


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (
            ["--verl-ref", "v0.8.0"],
            "resolving: no lockfile for v0.8.0: the committed lockfile "
            "lockfiles/cpu/cpu-linux-64.lock.yaml locks v0.9.1",
        ),
        (["--resolve"], "resolving: --resolve given"),
        (["--with-tests"], "resolving: --with-tests adds stages no lockfile holds"),
    ],
)
def test_another_ref_or_resolve_resolves_and_says_why(
    flags: list[str], why: str, tmp_path: Path
) -> None:
    plan = cli("plan", "--profile", "cpu", "--prefix", tmp_path / "env", *flags)
    assert first_line(plan) == why
    assert "--require-hashes" not in plan.stdout  # the stages resolve


def test_an_edited_profile_never_takes_the_stale_committed_lockfile(tmp_path: Path) -> None:
    edited = tmp_path / "edited.yaml"
    edited.write_text(
        "schema_version: 1\nname: cpu\nextends: cpu\n"
        "python: {requires: '>=3.11,<3.13', prefer: '3.11'}\n"
    )
    plan = cli("plan", "--profile", edited, "--prefix", tmp_path / "env")
    assert first_line(plan) == (
        "resolving: the committed lockfile lockfiles/cpu/cpu-linux-64.lock.yaml is stale: "
        "profile cpu changed since it was locked"
    )
    refused = cli("plan", "--profile", edited, "--prefix", tmp_path / "env", "--locked")
    assert refused.returncode == 3 and "is stale" in refused.stderr  # --locked: fit or fail


def test_resolve_and_locked_together_are_refused(tmp_path: Path) -> None:
    done = cli("plan", "--profile", "cpu", "--prefix", tmp_path / "env", "--locked", "--resolve")
    assert done.returncode == 2 and "--resolve" in done.stderr


# The three ways a run resolves. verl comes from the local stand-in repo (v0.9.0 and v0.9.1, each
# from its release sdist): through an edited profile that points at it (which is what makes it an
# edited profile), or --verl-source for another ref (whose reason, "no lockfile for <ref>", comes
# before the source's). --verl-source would name the source as the reason for an edited profile
# or another Python, so those two take the edited profile. Which route and why is the plan's, so
# each is checked from the plan; one of them (another ref: its own stack) is installed for real,
# since what a resolved env holds and records is what no plan can show, and that is the same
# whichever reason made it resolve (another Python's is heavy: a 4 GB CUDA torch).

STALE = (
    "resolving: the committed lockfile lockfiles/cpu/cpu-linux-64.lock.yaml is stale: "
    "profile cpu changed since it was locked"
)


@pytest.fixture(scope="module")
def edited_profile(tmp_path_factory: pytest.TempPathFactory, verl_two_releases: Path) -> Path:
    """The cpu profile, edited in a profile file of one's own: verl from the local repo."""
    path = tmp_path_factory.mktemp("profiles") / "cpu.yaml"
    body = {
        "schema_version": 1,
        "name": "cpu",
        "extends": "cpu",
        "verl": {"repo": str(verl_two_releases)},
    }
    path.write_text(yaml.safe_dump(body))
    return path


def other_python() -> str:
    """A Python X.Y on this machine in the cpu profile's range other than the committed lock's."""
    locked = read_lockfile(COMMITTED).python
    for version in ("3.12", "3.10"):
        if version == locked:
            continue
        try:
            interpreter_for(version)
        except InputError:
            continue
        return version
    # not a skip: CI's machines have pyenv's 3.10 and 3.12, and this route must be tested there
    pytest.fail(f"no Python 3.10 or 3.12 on this machine besides the committed lock's {locked}")


def env_holds(prefix: Path) -> dict[str, str]:
    """name -> version of every distribution in the env at `prefix`, as uv lists it."""
    python = str(prefix / "bin" / "python")
    done = subprocess.run(
        [uv_binary(), "pip", "list", "--python", python, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {d["name"].lower(): d["version"] for d in json.loads(done.stdout)}


def env_python(prefix: Path) -> str:
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def assert_resolved(
    prefix: Path, done: subprocess.CompletedProcess[str], why: str, *, verl: str, python: str
) -> None:
    """The run resolved and said why first, installed and verified, the env holds torch 2.13.0,
    verl `verl` and Python `python`, and its record (and so info and verify) names the route."""
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[0] == why  # the run's first line
    body = json.loads(done.stdout)
    assert body["ok"] is True
    assert body["route"] == {"kind": "resolve", "line": why, "lockfile": None, "origin": None}
    checks = {c["name"]: c["status"] for c in body["verify"]["checks"]}
    assert set(checks.values()) <= {"ok", "skipped"}, checks
    assert checks["version torch"] == "ok" and checks["import verl"] == "ok"

    holds = env_holds(prefix)
    assert holds["verl"] == verl
    # the CPU build where the PyTorch CPU index (or a find-links folder) serves one for this
    # Python, else the default index's build of the same version
    assert Version(holds["torch"]).public == "2.13.0"
    assert env_python(prefix) == python

    made = record(prefix)
    assert made["route"] == why and made["lockfile"] is None
    assert made["verl_ref"] == f"v{verl}"
    info = cli("info", "--prefix", prefix)
    assert info.returncode == 0, info.stderr
    assert f"from      {why}" in info.stdout, info.stdout
    # verify --against with no path: the env came from no lockfile, and it says which route
    against = cli("verify", "--prefix", prefix, "--against")
    assert against.returncode == 2
    assert f"was not installed from a lockfile ({why})" in against.stderr, against.stderr
    # the env matches the lockfile it recorded of what it resolved
    own = cli("verify", "--prefix", prefix, "--against", env_lockfile(prefix))
    assert own.returncode == 0, own.stdout + own.stderr
    assert own.stdout.strip().endswith(f"the env matches {env_lockfile(prefix)}")


def test_an_edited_profile_resolves_and_says_the_lockfile_is_stale(
    edited_profile: Path, verl_two_releases: Path, tmp_path: Path
) -> None:
    args = ("--profile", edited_profile, "--prefix", tmp_path / "env")
    assert first_line(cli("plan", *args)) == STALE
    assert plan_route(*args) == {"kind": "resolve", "line": STALE, "lockfile": None, "origin": None}
    plan = planned(*args)
    made = record_of(plan)  # what the run records in the env, from this plan
    assert made["route"] == STALE and made["lockfile"] is None
    assert made["verl_ref"] == "v0.9.1" and made["verl_repo"] == verl_two_releases.as_uri()
    python = interpreter_version(Path(str(made["interpreter"]))) or ""
    assert python.startswith(read_lockfile(COMMITTED).python + ".")  # the committed lock's
    # installed, it resolves as another ref does (test_another_ref_resolves_installs_its_stack...):
    # the committed lock's CPU torch, verl at the ref, and the route in the record, info and verify


@pytest.mark.real_slow  # a real resolving install
def test_another_ref_resolves_installs_its_stack_and_says_no_lockfile_holds_it(
    verl_two_releases: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    done = cli(
        "--profile",
        "cpu",
        "--prefix",
        prefix,
        "--verl-ref",
        "v0.9.0",
        "--verl-source",
        verl_two_releases,
        "--json",
    )
    why = (
        "resolving: no lockfile for v0.9.0: the committed lockfile "
        "lockfiles/cpu/cpu-linux-64.lock.yaml locks v0.9.1"
    )
    assert_resolved(prefix, done, why, verl="0.9.0", python=read_lockfile(COMMITTED).python)
    assert env_holds(prefix)["transferqueue"] == "0.1.8"  # v0.9.0's stack, not v0.9.1's
    assert Version(env_holds(prefix)["torch"]) == Version("2.13.0+cpu")  # the committed lock's


def _other_python_line(python: str) -> str:
    return (
        "resolving: the committed lockfile lockfiles/cpu/cpu-linux-64.lock.yaml locks Python "
        f"{read_lockfile(COMMITTED).python}; this run can use {python}"
    )


def test_another_python_resolves_and_says_the_lockfile_is_for_another(tmp_path: Path) -> None:
    python = other_python()
    plan = cli("plan", "--profile", "cpu", "--prefix", tmp_path / "plan", "--python", python)
    assert first_line(plan) == _other_python_line(python)


@pytest.mark.heavy  # cp312 has no CPU torch on the default index: its CUDA build, about 4 GB
def test_another_python_resolves_installs_and_says_the_lockfile_is_for_another(
    edited_profile: Path, tmp_path: Path
) -> None:
    python = other_python()
    why = _other_python_line(python)
    # the shipped profile gives the same reason (its Python is checked before its content)
    plan = cli("plan", "--profile", "cpu", "--prefix", tmp_path / "plan", "--python", python)
    assert first_line(plan) == why
    prefix = tmp_path / "env"
    done = cli("--profile", edited_profile, "--prefix", prefix, "--python", python, "--json")
    assert_resolved(prefix, done, why, verl="0.9.1", python=python)
