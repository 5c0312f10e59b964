"""Find a Python interpreter on this machine for the venv backend (never downloads one).

Looks on PATH (skipping pyenv shims, which fail for versions not made global, and virtual envs,
which make poor bases) and in pyenv's and the system's usual folders; the preferred version first.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError

__all__ = [
    "find_interpreter",
    "has_python",
    "interpreter_for",
    "interpreter_version",
    "minor_fits",
    "minor_range",
]

_MINORS = range(20, 7, -1)  # 3.20 … 3.8, newest first


def find_interpreter(requires: str, prefer: str, *, path: str | None = None) -> Path:
    """The preferred version if present, else the newest version in range."""
    allowed = SpecifierSet(requires)
    wanted = Version(prefer)
    minors = [f"{wanted.major}.{wanted.minor}"]
    minors += [
        f"3.{m}" for m in _MINORS if f"3.{m}" != minors[0] and minor_fits(f"3.{m}", requires)
    ]
    for minor in minors:
        for candidate in _candidates(minor, path):
            version = interpreter_version(candidate)
            if version and version in allowed:
                return candidate
    raise InputError(
        f"no Python {requires} found on this machine for the venv backend",
        hint="install one (your package manager, pyenv), pass --python PATH, "
        "or use --backend conda, which brings its own Python",
    )


def minor_fits(xy: str, requires: str) -> bool:
    """Whether some release of Python X.Y can meet `requires`: its first or a late patch does
    (`>=3.10.4` admits 3.10). The one rule for an X.Y against a profile's range, for the venv's
    interpreter search and for `lock --python-version`."""
    allowed = SpecifierSet(requires)
    return Version(f"{xy}.0") in allowed or Version(f"{xy}.99") in allowed


def minor_range(version: str) -> str:
    """The versions of `version`'s X.Y (3.12.4: >=3.12,<3.13): what a lockfile's Python allows."""
    major, minor = version.split(".")[:2]
    return f">={major}.{minor},<{major}.{int(minor) + 1}"


def has_python(version: str) -> bool:
    """Whether this machine has a Python of `version`'s X.Y for a venv (a lockfile's or bundle's
    Python, which the venv backend cannot download)."""
    try:
        find_interpreter(minor_range(version), version)
    except InputError:
        return False
    return True


def interpreter_for(given: str) -> Path:
    """`--python`, as uv reads it: an interpreter's path, or a version X.Y found on this machine."""
    version = re.fullmatch(r"(?:python)?(3\.\d{1,2})", given.strip())
    if version:
        return find_interpreter(f"=={version[1]}.*", f"{version[1]}.0")
    python = Path(given).expanduser()
    if not (python.is_file() and os.access(python, os.X_OK)) or interpreter_version(python) is None:
        raise InputError(
            f"--python {given}: not a Python interpreter",
            hint="pass an interpreter's path (e.g. /usr/bin/python3.12) or a version (e.g. 3.12)",
        )
    return python.absolute()


def _candidates(minor: str, path: str | None) -> Iterator[Path]:
    seen: set[Path] = set()
    on_path = shutil.which(f"python{minor}", path=path or os.environ.get("PATH"))
    places = [Path(on_path)] if on_path else []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    with contextlib.suppress(OSError):  # another user's pyenv (root's): not ours to look in
        places += sorted(pyenv.glob(f"{minor}.*/bin/python{minor}"), reverse=True)
    places += [Path(f"/usr/bin/python{minor}"), Path(f"/usr/local/bin/python{minor}")]
    for place in places:
        if place in seen or not place.exists() or "/shims/" in str(place) or _in_venv(place):
            continue
        seen.add(place)
        yield place


def _in_venv(python: Path) -> bool:
    return (python.parent.parent / "pyvenv.cfg").exists()


def interpreter_version(python: Path) -> str | None:
    try:
        done = proc.capture(
            # -I -S: no site-packages or user settings to load, just the version (3x faster)
            [str(python), "-I", "-S", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            timeout=20,
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None
