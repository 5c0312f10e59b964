"""Real lockfiles for the lock and export tests, made once per session.

The cpu profile is locked against the real index (and this machine's pip settings), with verl
from a real local git repo, so the lock records a commit. Each lock is made once per session
under pytest's base temp folder and shared by every test module that asks for it.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

from scaffold import run_tool
from verlrepo import CACHE, filling

HOST_XY = "{}.{}".format(*sys.version_info[:2])
CUTOFF = "2026-12-01T00:00:00Z"  # fixed: a re-lock must give the same bytes on any day


# The local conda channel is indexed when the tests start, after CUTOFF: conda locks use tomorrow.
TOMORROW = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).date()


def lock_args(repo: Path, output: Path, *extra: str, cutoff: str = CUTOFF) -> list[str]:
    """`lock` of the cpu profile for this interpreter's Python at the fixed cutoff."""
    return [
        "lock",
        "--profile",
        "cpu",
        "--cuda",
        "cpu",
        "--python-version",
        HOST_XY,
        "--exclude-newer",
        cutoff,
        "--verl-source",
        str(repo),
        "--output",
        str(output),
        *extra,
    ]


def make_lock(base: Path, repo: Path, name: str, *extra: str, cutoff: str = CUTOFF) -> Path:
    """Lock the cpu profile once per session into `base/locks/NAME.lock.yaml`."""
    path = base / "locks" / f"{name}.lock.yaml"
    if path.is_file():
        return path
    done = run_tool(*lock_args(repo, path, *extra, cutoff=cutoff))
    assert done.returncode == 0, done.stderr
    return path


def conda_lock_tool() -> Path:
    """conda-lock in its own venv (cached across runs).

    Not in the project's venv: conda-lock depends on pypa's `installer` package, whose name
    shadows ours there.
    """
    venv = CACHE / "conda-lock-4.0.3"
    with filling(venv.name):
        if not (venv / "bin" / "conda-lock").exists():
            _make_conda_lock_venv(venv)
    return venv


def _make_conda_lock_venv(venv: Path) -> None:
    from uv import find_uv_bin  # noqa: PLC0415

    uv = str(find_uv_bin())
    env = {**os.environ, "VIRTUAL_ENV": ""}
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=env)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "conda-lock==4.0.3"],
        check=True,
        env=env,
    )
    return venv
