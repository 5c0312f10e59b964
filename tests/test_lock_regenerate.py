"""A committed lock's regenerate line gives its versions back, and `lock --check` names each one a
regenerate line would not give back.

The index came to list, after the committed locks were made, files dated before their cutoff
(cachetools 8.0.3, google-auth 2.63.1, grpcio 1.85.4, markdown 3.11.4): a fresh resolution at the
same cutoff took them. A re-lock at the lock's own cutoff keeps its versions where they still fit,
as uv keeps those of its own lock. Real throughout: the committed cpu lock, resolved again against
the default index and this machine's find-links (its CPU torch), without the rest of this
machine's pip settings.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from scaffold import run_tool

from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import LOCKFILES_DIR

pytestmark = pytest.mark.real_slow  # each test resolves the cpu lock again: ~1 min

COMMITTED = LOCKFILES_DIR / "cpu" / "cpu-linux-64.lock.yaml"
# the CPU torch comes from pip's find-links here (the PyTorch CPU index is out of reach); no other
# pip setting of this machine may shape a lock
ENV = {**os.environ, "PIP_CONFIG_FILE": os.devnull}


def _copy(folder: Path) -> Path:
    path = folder / "lockfiles" / "cpu" / COMMITTED.name
    path.parent.mkdir(parents=True)
    shutil.copyfile(COMMITTED, path)
    return path


def test_the_committed_cpu_locks_regenerate_line_gives_its_versions_back(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    lock = read_lockfile(copy)
    words = shlex.split(lock.regenerate)
    assert words[:2] == ["verl-bootstrap", "lock"] and "--output" not in words
    run = run_tool(*words[1:], env=ENV, cwd=tmp_path, timeout=900)  # as written, in a checkout
    assert run.returncode == 0, run.stderr
    assert "no version changed against the previous lockfile" in run.stderr, run.stderr
    assert read_lockfile(copy).regenerate == lock.regenerate  # no --output of this host's folder
    again = read_lockfile(copy).distributions()
    assert {n: d.version for n, d in again.items()} == {
        n: d.version for n, d in lock.distributions().items()
    }


def test_lock_check_names_what_a_regenerate_line_does_not_give_back(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    data = yaml.safe_load(copy.read_text(encoding="utf-8"))
    # a distribution nothing in the cpu profile asks for, as the vllm lock holds it (a real
    # pure-Python wheel without requirements, its real sha256): every other check passes
    vllm = read_lockfile(LOCKFILES_DIR / "vllm-only" / "cu130-linux-64.lock.yaml")
    astor = vllm.distributions()["astor"]
    stray = astor.model_dump(mode="json", exclude_defaults=True)
    stage = next(s for s in data["stages"] if s["id"] == "verl-deps")
    stage["distributions"] = sorted([*stage["distributions"], stray], key=lambda d: d["name"])
    copy.write_text(yaml.safe_dump(data), encoding="utf-8")
    run = run_tool("lock", "--check", "--dir", str(tmp_path / "lockfiles"), env=ENV, timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"its regenerate line gives no astor (it locks {astor.version})" in run.stdout
    assert "1 difference(s) found" in run.stdout
