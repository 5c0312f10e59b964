"""A lab that tracks verl main: a ref with no stack in the profile whose checkout carries verl's
own uv.lock installs with no extra flag, its stack that lock's slice for the profile's extras
(the cpu profile: `cpu`), on a Python the lock is made for, and what the lock's sources this
machine cannot reach give instead is named (tests/mainrepo.py makes the repo: a real uv.lock,
with TransferQueue from a git repo that is gone and torch from the PyTorch CPU index, which
does not answer here).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from lockfixtures import CUTOFF
from mainrepo import TQ_DEV, make_main_repo
from packaging.utils import canonicalize_name
from packaging.version import Version
from scaffold import run_cli, run_tool
from verlrepo import git

from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.lock.drift import stale_lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.lockstack import recorded_stack, uv_lock_pin_gaps
from verl_bootstrap.lock.making.uvlock import UvLockPin, export_uv_lock
from verl_bootstrap.paths import env_lockfile


@pytest.fixture(scope="module")
def main_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_main_repo(tmp_path_factory.mktemp("verl-main"))


def _cpu_slice(repo: Path, work: Path) -> dict[str, UvLockPin]:
    pins = export_uv_lock(repo, ("cpu",), "3.11", "linux-64", work)
    assert pins
    return pins


def _env_pins(prefix: Path) -> dict[str, str]:
    """What the env holds, as uv lists it: name -> version."""
    python = str(prefix / "bin" / "python")
    argv = [uv_binary(), "pip", "list", "--python", python, "--format", "json"]
    listed = subprocess.run(argv, capture_output=True, text=True, check=True)
    return {canonicalize_name(d["name"]): d["version"] for d in json.loads(listed.stdout)}


def _checks_as_the_uv_lock(path: Path) -> None:
    """The lockfile at `path` replays its uv.lock stack: current (`lock --check`'s staleness),
    every pin of the slice as the lock (or its substitution) has it."""
    lock = read_lockfile(path)
    assert stale_lockfile(path).reason is None
    assert uv_lock_pin_gaps(lock, recorded_stack(lock)) == []


def test_the_plan_says_the_stack_is_the_uv_lock_and_names_each_substitution(
    main_repo: Path, tmp_path: Path
) -> None:
    args = ["plan", "--profile", "cpu", "--verl-source", main_repo, "--verl-ref", "main"]
    done = run_tool(*args, "--prefix", tmp_path / "env", timeout=300)
    assert done.returncode == 0, done.stderr
    route = (done.stdout + done.stderr).splitlines()[0]
    pins = _cpu_slice(main_repo, tmp_path)
    commit = git(main_repo, "rev-parse", "main")
    assert route.startswith("resolving: ")
    assert (
        f"the stack is verl's uv.lock at main ({commit[:12]}): its cpu slice, {len(pins)} pins, "
        "Python 3.11" in route
    )
    gone = (main_repo.parent / "TransferQueue").as_uri()
    assert f"transferqueue {TQ_DEV} from git {gone} at " in route
    assert route.endswith("-> transferqueue==0.1.10")  # the index's release nearest the dev one
    assert "torch 2.13.0+cpu from pytorch-cpu -> torch==2.13.0" in route
    said = done.stdout + done.stderr
    assert "which is unreachable here: 0.1.10 is the configured indexes' release nearest" in said
    assert "--allow-unsupported-ref" not in said
    assert f"get verl main from {main_repo.as_uri()}\n" in said  # no release sdist stands in


@pytest.mark.real_slow  # a full cpu install from the lock's slice: ~1 min from a warm cache
def test_main_installs_the_uv_lock_slice_with_no_extra_flag(
    main_repo: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    argv = ["--profile", "cpu", "--prefix", str(prefix), "--verl-source", str(main_repo)]
    run = run_cli([*argv, "--verl-ref", "main"])
    assert run.code == 0, run.stderr
    have = _env_pins(prefix)
    pins = _cpu_slice(main_repo, tmp_path)
    assert set(have) - set(pins) == {"verl"}  # nothing beyond the slice
    assert set(pins) - set(have) == set()
    index_pins = {n: p for n, p in pins.items() if not p.git}
    assert all(Version(have[n]) == Version(p.version) for n, p in index_pins.items())
    assert set(pins) - set(index_pins) == {"transferqueue"}  # git: the named substitution
    assert have["transferqueue"] == "0.1.10"  # the index's release nearest the lock's 0.1.10.dev0
    assert pins["torch"].version == "2.13.0+cpu" == have["torch"]  # the same CPU build
    assert (prefix / "bin" / "python3.11").exists()
    # the env's own lockfile says it is the uv.lock's slice, with its substitutions, as `lock`
    recorded = read_lockfile(env_lockfile(prefix)).uv_lock
    assert recorded is not None and recorded.pins == len(pins) and recorded.extras == ("cpu",)
    assert recorded.commit == git(main_repo, "rev-parse", "main")
    assert [s.split(":", 1)[0] for s in recorded.substitutions] == ["torch", "transferqueue"]
    _checks_as_the_uv_lock(env_lockfile(prefix))
    # verified again later with the stack it was installed with (made from its own checkout)
    again = run_cli(["verify", "--prefix", str(prefix)])
    assert again.code == 0, again.stderr


@pytest.fixture(scope="module")
def main_lock(main_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`lock --profile cpu` at main, into a lockfile folder of its own (as `lock --check` reads)."""
    folder = tmp_path_factory.mktemp("main-locks")
    output = folder / "cpu" / "cpu-linux-64.lock.yaml"
    output.parent.mkdir()
    args = ["lock", "--profile", "cpu", "--verl-source", main_repo, "--verl-ref", "main"]
    done = run_tool(*args, "--exclude-newer", CUTOFF, "-o", output, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "the stack is verl's uv.lock at main" in done.stderr
    return output


@pytest.mark.real_slow  # a real lock against the index: ~30 s
def test_lock_at_main_is_the_uv_lock_on_every_pin_and_records_its_substitutions(
    main_repo: Path, main_lock: Path, tmp_path: Path
) -> None:
    lock = read_lockfile(main_lock)
    locked = lock.distributions()
    pins = _cpu_slice(main_repo, tmp_path)
    assert set(pins) <= set(locked)
    for name, pin in pins.items():
        if not pin.git:
            assert Version(locked[name].version) == Version(pin.version), name
    assert locked["transferqueue"].version == "0.1.10"
    assert lock.python == "3.11" and lock.verl.ref == "main"
    assert lock.uv_lock is not None and lock.uv_lock.pins == len(pins)
    assert lock.uv_lock.commit == git(main_repo, "rev-parse", "main")
    subs = lock.uv_lock.substitutions
    assert [s.split(":", 1)[0] for s in subs] == ["torch", "transferqueue"]
    assert f"transferqueue: {TQ_DEV} from git " in subs[1] and "-> transferqueue==0.1.10" in subs[1]


@pytest.mark.real_slow  # `lock --check` re-reads the lock's uv.lock, and resolves it again
def test_lock_check_passes_the_lock_and_fails_a_pin_that_left_the_uv_lock(
    main_repo: Path, main_lock: Path, tmp_path: Path
) -> None:
    check = ["lock", "--check", "--profile", "cpu", "--verl-source", main_repo]
    done = run_tool(*check, "--dir", main_lock.parent.parent, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    moved = tmp_path / "cpu" / main_lock.name
    moved.parent.mkdir()
    data = yaml.safe_load(main_lock.read_text(encoding="utf-8"))
    for stage in data["stages"]:
        for dist in stage["distributions"]:
            if dist["name"] == "idna":
                was, dist["version"] = dist["version"], "3.10"
    moved.write_text(yaml.safe_dump(data), encoding="utf-8")
    done = run_tool(*check, "--dir", tmp_path, timeout=900)
    assert done.returncode != 0
    assert f"pins idna==3.10, verl's uv.lock has {was}" in done.stdout + done.stderr


@pytest.mark.real_slow  # the lock above installed --locked: ~1 min from a warm cache
def test_a_lock_at_main_installs_locked_with_the_locks_pins(
    main_repo: Path, main_lock: Path, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    argv = ["--profile", "cpu", "--prefix", str(prefix), "--verl-source", str(main_repo)]
    run = run_cli([*argv, "--verl-ref", "main", "--locked", "--lockfile", str(main_lock)])
    assert run.code == 0, run.stderr
    lock = read_lockfile(main_lock)
    locked = {n: d.version for n, d in lock.distributions().items()}
    assert _env_pins(prefix) == locked
    own = read_lockfile(env_lockfile(prefix))  # the env's record: that lockfile, as installed
    assert own.uv_lock == lock.uv_lock and own.uv_lock is not None
    _checks_as_the_uv_lock(env_lockfile(prefix))
    again = run_cli(["verify", "--prefix", str(prefix)])
    assert again.code == 0, again.stderr


NOT_SERVED = """\
schema_version: 1
name: notserved
verl:
  repo: https://github.com/verl-project/verl.git
  ref: v0.9.1
python:
  requires: ">=3.10,<3.13"
  prefer: "3.11"
env:
  backend: venv
cuda_variants:
  cpu:
    description: no CUDA
stages:
  - id: missing
    packages: ["verl-bootstrap-no-such-distribution==1.0"]
"""


def test_a_failed_lock_names_a_log_that_is_still_there(main_repo: Path, tmp_path: Path) -> None:
    profile = tmp_path / "notserved.yaml"
    profile.write_text(NOT_SERVED, encoding="utf-8")
    args = ["lock", "--profile", profile, "--cuda", "cpu", "--verl-source", main_repo]
    done = run_tool(*args, "-o", tmp_path / "out.lock.yaml", timeout=300)
    assert done.returncode != 0
    found = re.search(r"the full log is (\S+\.log)", done.stderr)
    assert found, done.stderr
    assert "verl-bootstrap-no-such-distribution" in Path(found.group(1)).read_text()
