"""The route a run takes, for real: the committed lockfile by default, the lab's when it fits,
resolving (and why) when none fits. Real installs from the real index and pip settings."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lockfixtures import make_lock

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
COMMITTED_LINE = (
    "from lockfile lockfiles/cpu/cpu-linux-64.lock.yaml (locked 2026-12-01, every artifact "
    "hash-checked)"
)


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`verl-bootstrap ARGS` in a fresh process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "verl_bootstrap", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO,
        check=False,
    )


def first_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()[0]


def record(prefix: Path) -> dict[str, object]:
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text())
    return dict(state["record"])


@pytest.fixture(scope="module")
def committed_env(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A fresh `verl-bootstrap --profile cpu`, as on a fresh clone (no flag but where)."""
    prefix = tmp_path_factory.mktemp("route") / "cpu"
    return prefix, cli("--profile", "cpu", "--prefix", prefix, "--json")


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


def test_a_fresh_default_run_installs_the_committed_lockfile_and_says_so(
    committed_env: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    prefix, done = committed_env
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


def test_an_env_made_from_a_lockfile_verifies_against_it_by_default(
    committed_env: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    prefix, _ = committed_env
    done = cli("verify", "--prefix", prefix, "--against", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] and body["hashes_checked"] and body["lockfile"] == str(COMMITTED)
    assert body["differences"] == []


def test_the_labs_lockfile_wins_over_the_committed_one(
    lab: Path, verl_repo_session: Path, tmp_path: Path
) -> None:
    lock = lab / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
    prefix = tmp_path / "env"
    done = cli(
        "--profile",
        "cpu",
        "--prefix",
        prefix,
        "--verl-source",
        verl_repo_session,
        "--config",
        lab / "site.yaml",
        "--json",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    route = json.loads(done.stdout)["route"]
    assert route["kind"] == "lockfile" and route["origin"] == "lab"
    assert route["lockfile"] == str(lock) and route["line"].startswith(f"from lockfile {lock} (")
    against = cli("verify", "--prefix", prefix, "--against")
    assert against.returncode == 0, against.stdout + against.stderr
    assert against.stdout.strip().endswith(f"the env matches {lock}")


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
