"""An env's life, for real: made with non-default options, failed and resumed with the printed hint,
switched to another verl release (refused first, then interrupted and resumed), inspected, and
removed. One env (the light profile, a local verl repo with v0.9.0 and v0.9.1 made from their real
sdists) is shared by the tests, which run in file order.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scaffold import Ran, invoke
from test_e2e_cpu import closed_port, start_install, wait_until_running
from verlrepo import git

from verl_bootstrap.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, EXIT_STEP_FAILED
from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.lock.io import read_lockfile

DATA = Path(__file__).parent / "data" / "profiles"


def state(prefix: Path) -> dict[str, Any]:
    return json.loads((prefix / ".verl-bootstrap" / "state.json").read_text("utf-8"))  # type: ignore[no-any-return]


def versions(prefix: Path) -> dict[str, str]:
    return {name: dist.version for name, dist in installed(prefix).items()}


@dataclass(frozen=True)
class Made:
    prefix: Path
    repo: Path
    profile: Path
    index: str
    failed: Ran
    resumed: Ran


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, verl_two_releases: Path) -> Made:
    """Built at `main` (= v0.9.1) with --cuda, --index, --verl-source and --allow-unsupported-ref.

    The first run fails in fetch-source (the repository is away); the printed hint, run as
    printed once it is back, completes the env.
    """
    root = tmp_path_factory.mktemp("lifecycle")
    profile = Path(shutil.copytree(DATA / "light", root / "light")) / "light.yaml"
    # a URL no earlier session used: the tool's source cache is per user and keyed by URL, and
    # serves a cached ref when the repository is away (a reused tmp path would not fail)
    repo = Path(shutil.copytree(verl_two_releases, root / f"verl-{secrets.token_hex(4)}"))
    mirror = root / "mirror"  # a lab's (empty) mirror of the CPU index: torch then comes from
    mirror.mkdir()  # the default index, as when the PyTorch index is out of reach
    index = f"pytorch-cpu={mirror.as_uri()}"
    prefix = root / "env"
    argv = [
        "--profile",
        str(profile),
        "--prefix",
        str(prefix),
        "--verl-source",
        repo.as_uri(),
        "--verl-ref",
        "main",
        "--allow-unsupported-ref",
        "--cuda",
        "cpu",
        "--index",
        index,
    ]
    away = repo.rename(root / "away")
    failed = invoke(argv)
    away.rename(repo)
    resumed = invoke([*failed.hint(), "--json"])
    return Made(prefix, repo, profile, index, failed, resumed)


def test_a_failed_run_prints_a_hint_that_resumes_it_with_every_option(made: Made) -> None:
    assert made.failed.code == EXIT_STEP_FAILED
    assert "step 'fetch-source' failed: cannot reach verl's git repository" in made.failed.err
    assert made.failed.hint() == ["--prefix", str(made.prefix)]
    assert made.resumed.code == EXIT_OK, made.resumed.err
    steps = {s["id"]: s["status"] for s in made.resumed.json()["steps"]}
    assert steps["create-env"] == "skipped"  # done by the failed run, kept
    assert {steps[s] for s in ("fetch-source", "install-verl", "torch", "verify")} == {"done"}
    options = state(made.prefix)["record"]["options"]
    assert options["verl_source"] == made.repo.as_uri()
    assert options["verl_ref"] == "main"
    assert options["cuda"] == "cpu"
    assert options["allow_unsupported_ref"] is True
    assert ["pytorch-cpu", made.index.split("=", 1)[1]] in options["indexes"]
    assert options["profile"] == str(made.profile)


def test_the_record_the_checkout_and_the_lockfile_agree(made: Made) -> None:
    body = state(made.prefix)
    source = body["steps"]["fetch-source"]["outputs"]
    main = git(made.repo, "rev-parse", "main")
    assert (source["ref"], source["commit"]) == ("main", main)
    assert body["record"]["verl_ref"] == "main"
    assert body["record"]["variant"] == "cpu"
    assert git(made.prefix / "src" / "verl", "rev-parse", "HEAD") == main
    assert (
        read_lockfile(made.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml").verl.commit
        == main
    )
    assert versions(made.prefix)["verl"] == "0.9.1"


def test_the_prefix_alone_re_verifies_and_skips_each_step_once(made: Made) -> None:
    again = invoke(["--prefix", str(made.prefix)])
    assert again.code == EXIT_OK, again.err
    assert "this run changes" not in again.err
    assert again.err.count("· create-env: up to date\n") == 1
    assert "create-env: create-env" not in again.err


def test_a_switch_without_yes_shows_the_change_and_changes_nothing(made: Made) -> None:
    before = (made.prefix / ".verl-bootstrap" / "state.json").read_bytes()
    head = git(made.prefix / "src" / "verl", "rev-parse", "HEAD")
    stack = versions(made.prefix)
    refused = invoke(["--prefix", str(made.prefix), "--verl-ref", "v0.9.0"])  # stdin is no terminal
    assert refused.code == EXIT_REFUSED
    assert (
        "verl ref main -> v0.9.0: new checkout; stages torch, verl-deps re-run; Python unchanged"
        in refused.err
    )
    assert "re-run with --yes" in refused.err
    assert (made.prefix / ".verl-bootstrap" / "state.json").read_bytes() == before
    assert git(made.prefix / "src" / "verl", "rev-parse", "HEAD") == head
    assert versions(made.prefix) == stack


def test_a_change_that_needs_another_env_is_refused_even_with_yes(made: Made) -> None:
    before = (made.prefix / ".verl-bootstrap" / "state.json").read_bytes()
    refused = invoke(["--prefix", str(made.prefix), "--backend", "conda", "--yes", "--json"])
    assert refused.code == EXIT_REFUSED
    error = refused.json()["error"]
    assert error["data"]["changes"] == [{"what": "backend", "old": "venv", "new": "conda"}]
    assert len(error["data"]["blockers"]) == 1  # the backend change: another env, not this one
    assert f"--prefix {made.prefix}-new" in error["hint"]
    assert (made.prefix / ".verl-bootstrap" / "state.json").read_bytes() == before


def test_an_interrupted_switch_resumes_with_the_hint_and_everything_agrees(
    made: Made, tmp_path: Path
) -> None:
    started = state(made.prefix)["steps"]["verl-deps"]["started"]
    log = tmp_path / "switch.log"
    switch = start_install(["--prefix", str(made.prefix), "--verl-ref", "v0.9.0", "--yes"], log)
    wait_until_running(switch, made.prefix, "verl-deps", after=started)
    switch.send_signal(signal.SIGINT)
    assert switch.wait(timeout=120) == EXIT_INTERRUPTED
    output = log.read_text(encoding="utf-8")
    assert f"hint: resume with: verl-bootstrap --prefix {made.prefix}\n" in output
    assert state(made.prefix)["last_run"]["status"] == "interrupted"

    resumed = invoke(["--prefix", str(made.prefix), "--json"])
    assert resumed.code == EXIT_OK, resumed.err
    assert "this run changes" not in resumed.err  # the record already says v0.9.0
    steps = {s["id"]: s["status"] for s in resumed.json()["steps"]}
    assert steps["fetch-source"] == steps["torch"] == "skipped"
    assert steps["verl-deps"] == "done"
    v090 = git(made.repo, "rev-parse", "v0.9.0")
    body = state(made.prefix)
    assert body["record"]["verl_ref"] == "v0.9.0"
    source = body["steps"]["fetch-source"]["outputs"]
    assert (source["ref"], source["commit"]) == ("v0.9.0", v090)
    assert git(made.prefix / "src" / "verl", "rev-parse", "HEAD") == v090
    lock = read_lockfile(made.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml")
    assert (lock.verl.ref, lock.verl.commit) == ("v0.9.0", v090)
    assert versions(made.prefix)["verl"] == "0.9.0"


def test_envs_list_and_info_describe_the_env(made: Made) -> None:
    listed = invoke(["envs", "list", "--json"])
    assert listed.code == EXIT_OK, listed.err
    mine = next(e for e in listed.json()["envs"] if e["prefix"] == str(made.prefix))
    assert (mine["status"], mine["profile"], mine["verl_ref"], mine["variant"]) == (
        "ok",
        "light",
        "v0.9.0",
        "cpu",
    )
    assert mine["commit"] == git(made.repo, "rev-parse", "v0.9.0")
    assert mine["size"] > 100_000_000 and mine["verified_at"] is not None
    text = invoke(["envs", "list"]).out
    row = next(line.split() for line in text.splitlines() if str(made.prefix) in line.split())
    assert row[:2] == [mine["name"], str(made.prefix)]  # NAME, then PREFIX
    assert row[2:7] == ["ok", "light", "v0.9.0", "(commit", f"{mine['commit'][:12]})"]
    assert row[7] == "cpu"

    info = invoke(["info", "--prefix", str(made.prefix), "--json"]).json()
    assert info["record"]["options"]["cuda"] == "cpu"
    assert info["steps"]["verify"]["status"] == "done"
    assert info["lockfile"] == str(made.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml")
    assert info["activate"] == f". {made.prefix / '.verl-bootstrap' / 'activate'}"
    shown = invoke(["info", "--prefix", str(made.prefix)]).out
    assert f"verl      v0.9.0, commit {mine['commit']} of {made.repo.as_uri()}" in shown


def test_remove_refuses_a_prefix_holding_a_users_file_then_removes_the_env(made: Made) -> None:
    note = made.prefix / "my-notes.txt"
    note.write_text("mine\n", encoding="utf-8")
    names = sorted(p.name for p in made.prefix.iterdir())
    refused = invoke(["remove", "--prefix", str(made.prefix), "--yes", "--json"])
    assert refused.code == EXIT_REFUSED
    data = refused.json()["error"]["data"]
    assert data == {"foreign": ["my-notes.txt"], "work": [], "deleted": False}, data
    assert sorted(p.name for p in made.prefix.iterdir()) == names

    note.unlink()
    asked = invoke(["remove", "--prefix", str(made.prefix)])  # no terminal to ask on: refused
    assert asked.code == EXIT_REFUSED and made.prefix.is_dir()
    removed = invoke(["remove", "--prefix", str(made.prefix), "--yes"])
    assert removed.code == EXIT_OK, removed.err
    assert not made.prefix.exists()
    listed = invoke(["envs", "list", "--json", "--no-size"]).json()["envs"]
    assert str(made.prefix) not in [e["prefix"] for e in listed]
    assert made.repo.is_dir()  # the source it cloned from is not the env's


def test_a_conda_env_is_listed_inspected_and_removed(
    tmp_path: Path, python_channel: Path, verl_repo_session: Path
) -> None:
    prefix = tmp_path / "conda-env"
    away = f"http://127.0.0.1:{closed_port()}/verl.git"  # fetch-source fails; the env is made
    argv = [
        "--profile",
        str(DATA / "light" / "light.yaml"),
        "--prefix",
        str(prefix),
        "--backend",
        "conda",
        "--channel",
        str(python_channel),
        "--verl-source",
        away,
        "--verl-ref",
        "main",
        "--allow-unsupported-ref",
    ]
    first = invoke(argv)
    assert first.code == EXIT_STEP_FAILED, first.err
    assert (prefix / "conda-meta").is_dir()
    mine = next(
        e for e in invoke(["envs", "list", "--json"]).json()["envs"] if e["prefix"] == str(prefix)
    )
    assert (mine["status"], mine["backend"], mine["verified_at"]) == ("failed", "conda", None)
    info = invoke(["info", "--prefix", str(prefix), "--json"]).json()
    assert info["steps"]["create-env"]["status"] == "done"
    assert info["record"]["options"]["channels"] == [str(python_channel)]
    assert info["activate"] is None
    removed = invoke(["remove", "--prefix", str(prefix), "--yes"])
    assert removed.code == EXIT_OK, removed.err
    assert not prefix.exists()


def test_remove_refuses_what_verl_bootstrap_did_not_make(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    refused = invoke(["remove", "--prefix", str(folder), "--yes", "--json"])
    assert refused.code == 2
    missing = str(folder / ".verl-bootstrap" / "state.json")
    assert refused.json()["error"]["data"] == {"prefix": str(folder), "missing": missing}
    assert (folder / "sub").is_dir()


def _completions(shell_line: str) -> subprocess.CompletedProcess[str]:
    bindir = Path(sys.executable).parent
    script = (
        "source <(verl-bootstrap completion --shell bash)\n"
        f"COMP_LINE={shlex.quote(shell_line)}; COMP_POINT=${{#COMP_LINE}}\n"
        'read -ra COMP_WORDS <<< "$COMP_LINE"; COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n'
        '_python_argcomplete verl-bootstrap "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, check=False
    )


def test_bash_completes_commands_flags_and_profile_names() -> None:
    profiles = _completions("verl-bootstrap --profile c")
    assert profiles.returncode == 0, profiles.stderr
    assert profiles.stdout.split() == ["cpu"]
    assert _completions("verl-bootstrap install --profile fs").stdout.split() == [
        "fsdp",
        "fsdp-script",
    ]
    assert "envs" in _completions("verl-bootstrap en").stdout.split()
    assert "--verl-ref" in _completions("verl-bootstrap --verl-").stdout.split()
