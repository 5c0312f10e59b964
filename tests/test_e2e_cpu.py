"""The cpu profile end to end, for real: a venv, verl from a local git repo, CPU torch, verify.

One full install is shared by the assertions on it (module fixture); a second run must skip
every step. Then: the sdist fallback when git is unreachable, and a run killed or interrupted in
the middle of a stage, resumed by running the same command again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cpuenv import Installed
from scaffold import run_cli, tool_argv
from verlrepo import git, verl_sdist

from verl_bootstrap.errors import EXIT_INTERRUPTED, EXIT_OK, StepFailed
from verl_bootstrap.events import Event, listening
from verl_bootstrap.installer.cmdline import pip_launcher
from verl_bootstrap.installer.envs.venv import VenvBackend
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.stepcontract import SourceOutputs
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.steps.create_env import env_request
from verl_bootstrap.run.steps.kinds import execute_step
from verl_bootstrap.run.steps.record_lock import write_env_lock
from verl_bootstrap.run.steps.stepcontext import StepContext
from verl_bootstrap.source.fetch import fetch_source
from verl_bootstrap.source.spec import SourceSpec

DATA = Path(__file__).parent / "data" / "profiles"
STEPS = [
    "create-env",
    "fetch-source",
    "install-verl",
    "torch",
    "verl-deps",
    "record-lock",
    "verify",
]


@pytest.fixture(scope="module")
def cpu_env(cpu_env_session: Installed) -> Installed:
    """The session's cpu env (tests/cpuenv.py), shared with the verl-tests test."""
    return cpu_env_session


def test_the_cpu_profile_installs_and_verifies(cpu_env: Installed) -> None:
    run = cpu_env.first
    assert run.code == EXIT_OK, run.stderr
    assert run.body["ok"] is True
    assert run.statuses == dict.fromkeys(STEPS, "done")
    checks = {c["name"]: c for c in run.body["verify"]["checks"]}
    for name in ("import verl", "import verl.trainer.main_ppo", "version torch", "uv pip check"):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["gpu smoke test"]["status"] == "skipped"
    links = checks["native links"]  # torch's, numpy's, ... libraries each find their symbols
    assert links["data"]["libraries"] > 100, links
    # but torchcodec's: without the PyTorch CPU index (unreachable here) the default index's
    # torchcodec is a CUDA build, a named warning that says where its CPU build comes from
    gaps = links["data"].get("gaps", [])
    assert all(gap.startswith("torchcodec/") for gap in gaps), links
    assert links["status"] == ("warn" if gaps else "ok"), links
    store = run.body["verify"]["bytecode"]  # what the bytecode store did (tests/test_bytecode.py)
    assert {"restored", "stored", "seconds"} <= set(store), store
    assert run.body["activate"] == f". {cpu_env.prefix / '.verl-bootstrap' / 'activate'}"


def test_the_env_imports_verl_and_its_ppo_trainer_from_the_checkout(cpu_env: Installed) -> None:
    code = (
        "import verl, verl.trainer.main_ppo, torch; "
        "print(verl.__file__); print(torch.__version__); print(torch.version.cuda)"
    )
    done = subprocess.run(
        [str(cpu_env.prefix / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONNOUSERSITE": "1"},
    )
    where, torch_version, cuda = done.stdout.split()
    assert Path(where) == cpu_env.prefix / "src" / "verl" / "verl" / "__init__.py"
    assert torch_version == "2.13.0+cpu"
    assert cuda == "None"


def test_the_lockfile_names_the_repos_commit(cpu_env: Installed) -> None:
    lock = read_lockfile(cpu_env.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml")
    assert lock.verl.kind == "git"
    assert lock.verl.commit == git(cpu_env.repo, "rev-parse", "v0.9.1")
    assert lock.verl.repo == cpu_env.repo.resolve().as_uri()
    assert lock.verl.ref == "v0.9.1"
    assert lock.verl.sdist_sha256 is None
    assert lock.profile == "cpu"
    assert lock.backend == "venv"
    assert lock.cuda.variant == "cpu"
    assert [s.id for s in lock.stages] == ["install-verl", "torch", "verl-deps"]
    dists = lock.distributions()
    assert dists["verl"].version == "0.9.1"
    assert dists["torch"].version == "2.13.0+cpu"
    assert "ray" in dists
    head = git(cpu_env.prefix / "src" / "verl", "rev-parse", "HEAD")
    assert head == lock.verl.commit


def test_a_second_run_skips_every_step(cpu_env: Installed) -> None:
    lockfile = cpu_env.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml"
    before = lockfile.read_bytes()
    again = run_cli(cpu_env.argv)
    assert again.code == EXIT_OK, again.stderr
    assert again.statuses == dict.fromkeys(STEPS, "skipped")
    assert {s["reason"] for s in again.body["steps"]} == {"up to date"}
    assert lockfile.read_bytes() == before
    assert again.body["verify"]["ok"] is True  # the verification it skipped is reported


# --- the sdist fallback ------------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_git_url_falls_back_to_the_release_sdist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))  # an empty source cache
    url = f"http://127.0.0.1:{closed_port()}/verl.git"
    options = RunOptions(profile="cpu", prefix=tmp_path / "env", verl_source=url)
    plan = prepare_plan(options, driver=None, detect=False, check_optional=False)
    assert plan.source.sdist_fallback
    assert (
        "if unreachable: verl==0.9.1 sdist from the index" in plan.step("fetch-source").description
    )
    log = tmp_path / "fetch-source.log"

    result = fetch_source(plan.source, plan.settings, pip=pip_launcher(), log_path=log)

    expected_sha = hashlib.sha256(verl_sdist().read_bytes()).hexdigest()  # the index's artifact
    assert result.kind == "sdist"
    assert result.commit is None
    assert result.sdist_sha256 == expected_sha
    assert result.sdist_name == "verl-0.9.1.tar.gz"
    assert f"git repository {url} unreachable" in result.note
    assert "release sdist from the configured index" in result.note
    text = log.read_text(encoding="utf-8")
    assert "Connection refused" in text or "Failed to connect" in text
    assert result.note in text
    assert (plan.source.checkout / "verl" / "__init__.py").is_file()
    assert (plan.source.checkout / "pyproject.toml").is_file()

    # the env's lockfile records the sdist and its hash instead of a commit
    VenvBackend().create(env_request(plan, tmp_path / "create-env.log"))
    lock = read_lockfile(write_env_lock(plan, result, snapshots={}))
    assert lock.verl.kind == "sdist"
    assert lock.verl.sdist_sha256 == expected_sha
    assert lock.verl.sdist == "verl-0.9.1.tar.gz"
    assert lock.verl.commit is None

    # a re-run reuses the unpacked sdist, and still knows it is one
    again = fetch_source(plan.source, plan.settings, pip=pip_launcher(), log_path=log)
    assert (again.kind, again.sdist_sha256) == ("sdist", expected_sha)
    assert "reused" in again.note

    # a second env takes the checked archive from the source cache: no download (pip cannot run)
    other = replace(plan.source, checkout=tmp_path / "other" / "src" / "verl")
    cached = fetch_source(other, plan.settings, pip=["false"], log_path=log)
    assert (cached.kind, cached.sdist_sha256) == ("sdist", expected_sha)
    assert "from the source cache" in cached.note
    assert (other.checkout / "pyproject.toml").is_file()


def test_the_run_tells_the_user_when_the_release_sdist_stands_in_for_git(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/verl.git"
    options = RunOptions(profile="cpu", prefix=tmp_path / "env", verl_source=url)
    plan = prepare_plan(options, driver=None, detect=False, check_optional=False)
    events: list[Event] = []
    context = StepContext(plan, plan.step("fetch-source"), tmp_path / "fetch.log", prior={})
    with listening(events.append):
        outputs = execute_step(context)
    notes = [e.message for e in events if e.kind == ("note",)]
    assert isinstance(outputs, SourceOutputs)
    assert notes == [outputs.note]  # the renderer prints it as "note: ..." on the terminal
    assert f"git repository {url} unreachable" in notes[0]
    # from the index, or from the source cache when an earlier env downloaded it already
    assert "release sdist from the" in notes[0] and "configured index" in notes[0]
    reason = notes[0].split(" unreachable (", 1)[1].split("); using verl", 1)[0]
    assert reason.startswith("fatal: unable to access"), reason  # git's own words, not a quote
    assert "Failed to connect" in reason or "Connection refused" in reason, reason


def test_an_unreachable_git_url_at_a_branch_fails_saying_what_to_pass(tmp_path: Path) -> None:
    spec = SourceSpec(
        repo=f"http://127.0.0.1:{closed_port()}/verl.git",
        ref="main",  # not a release: there is no sdist to fall back to
        checkout=tmp_path / "src" / "verl",
        sdist_fallback=True,
    )
    with pytest.raises(StepFailed) as raised:
        fetch_source(spec, prepare_settings(tmp_path), pip=pip_launcher(), log_path=tmp_path / "l")
    assert raised.value.data == {"repo": spec.repo, "ref": "main", "release": None}
    assert "--verl-source" in (raised.value.hint or "")
    assert not spec.checkout.exists()


def prepare_settings(tmp_path: Path) -> IndexSettings:
    options = RunOptions(profile="cpu", prefix=tmp_path / "env")
    return prepare_plan(options, driver=None, detect=False, check_optional=False).settings


# --- killed and interrupted runs resume --------------------------------------------------------


def read_steps(prefix: Path) -> dict[str, dict[str, Any]]:
    try:
        state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text("utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return state["steps"]  # type: ignore[no-any-return]


def wait_until_running(
    child: subprocess.Popen[bytes], prefix: Path, step: str, *, after: float = 0.0
) -> dict[str, Any]:
    """Poll the state file until `step` is running (started after `after`) and its command has
    printed something: then the installer's child process exists, as it would when a user
    gives up on a slow stage."""
    deadline = time.monotonic() + 300  # only bounds a broken run; a good one takes seconds
    while time.monotonic() < deadline:
        assert child.poll() is None, f"the install exited ({child.returncode}) before {step} ran"
        record = read_steps(prefix).get(step)
        if record and record["status"] == "running" and record["started"] > after:
            with contextlib.suppress(FileNotFoundError):
                if len(Path(record["log"]).read_text(encoding="utf-8").splitlines()) > 1:
                    return record
        time.sleep(0.02)
    raise AssertionError(f"{step} never ran")


def kill_leftovers(prefix: Path) -> None:
    """End the children a SIGKILLed installer leaves behind (they run in their own session).

    A crash that takes the whole job (OOM, a scheduler's kill) takes them too; the test does
    the same, so that the next run does not race a stale uv.
    """
    needle = str(prefix).encode()
    for _ in range(200):
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if needle in (entry / "cmdline").read_bytes():
                        found.append(int(entry.name))
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    raise AssertionError(f"children of the killed run still hold {prefix}")


def start_install(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """The CLI as a user starts it in a terminal, where Ctrl-C reaches it."""
    with log.open("wb") as out:
        return subprocess.Popen(
            tool_argv(*argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_sigint_default,  # noqa: PLW1509
        )


def _sigint_default() -> None:
    """A test run started in the background (`pytest ... &`) ignores SIGINT, and its children
    would inherit that: the CLI would then rightly ignore the test's Ctrl-C, as any program
    started from a background job does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_killed_then_interrupted_run_resumes_at_the_unfinished_stage(
    tmp_path: Path, verl_repo_session: Path
) -> None:
    profile = Path(shutil.copytree(DATA / "light", tmp_path / "light")) / "light.yaml"
    prefix = tmp_path / "env"
    argv = [
        "--profile",
        str(profile),
        "--prefix",
        str(prefix),
        "--verl-source",
        str(verl_repo_session),
    ]
    finished = ["create-env", "fetch-source", "install-verl", "torch"]

    # 1. SIGKILL while verl's dependencies install: no chance to save anything.
    killed = start_install(argv, tmp_path / "killed.log")
    first = wait_until_running(killed, prefix, "verl-deps")
    killed.send_signal(signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL
    kill_leftovers(prefix)
    after_kill = read_steps(prefix)
    assert {s: after_kill[s]["status"] for s in finished} == dict.fromkeys(finished, "done")
    assert after_kill["verl-deps"]["status"] == "running"  # as the killed run left it

    # 2. Re-run, and Ctrl-C it in the same stage: exit 130, the stage marked interrupted.
    interrupted = start_install(argv, tmp_path / "interrupted.log")
    wait_until_running(interrupted, prefix, "verl-deps", after=first["started"])
    interrupted.send_signal(signal.SIGINT)
    assert interrupted.wait(timeout=120) == EXIT_INTERRUPTED
    output = (tmp_path / "interrupted.log").read_text(encoding="utf-8")
    assert "error: interrupted; the env's state is saved" in output
    assert f"hint: resume with: verl-bootstrap --prefix {prefix}\n" in output
    after_int = read_steps(prefix)
    assert after_int["verl-deps"]["status"] == "interrupted"
    for step in finished:  # skipped, not re-run: their records are the first run's
        assert after_int[step] == after_kill[step]
    stage_log = Path(after_int["verl-deps"]["log"]).read_text(encoding="utf-8")
    assert "[exit 0]" not in stage_log  # uv was stopped, not left to finish the stage
    assert sorted(p.name for p in Path(after_int["verl-deps"]["log"]).parent.iterdir()) == [
        "verl-deps.log"
    ]

    # 3. The same command again: the finished steps are skipped, the rest runs and verifies.
    resumed = run_cli([*argv, "--json"])
    assert resumed.code == EXIT_OK, resumed.stderr
    assert resumed.statuses == {
        **dict.fromkeys(finished, "skipped"),
        "verl-deps": "done",
        "record-lock": "done",
        "verify": "done",
    }
    assert resumed.body["verify"]["ok"] is True
