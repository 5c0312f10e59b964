"""Which of a locked version's files an install takes: the one an installer would pick for the
lock's Python and platform.

A lockfile allows every file of a version that fits its platform, and a package may ship a pure
`py3-none-any` wheel beside platform wheels that bundle a native library (soundfile's manylinux
wheel holds libsndfile, its any-wheel expects the host to have it). pip and uv take the wheel
whose tags come first in the target's tag order (the most specific), so a locked install that
names one file by URL must take that one too, not the first by file name. The order is uv's, the
installer the locked stages run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.platforms import DEFAULT_GLIBC, MACHINES, locked_glibc

__all__ = ["install_order", "preferred", "target_tags"]

# the manylinux levels older than PEP 600 names, and the glibc each stands for
_LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
_OLDEST_MINOR = {"x86_64": 5, "i686": 5}  # other machines have no manylinux before glibc 2.17


def _linux_platforms(machine: str, glibc: str) -> Iterator[str]:
    """Linux platform tags for `machine` with `glibc`, the most preferred first, as uv (the
    installer) orders them: each manylinux level down from the glibc, its legacy name after it,
    then a plain `linux_` wheel last (packaging's own order puts that one first; uv does not)."""
    major, minor = (int(part) for part in glibc.split(".")[:2])
    for level in range(minor, _OLDEST_MINOR.get(machine, 17) - 1, -1):
        yield f"manylinux_{major}_{level}_{machine}"
        legacy = _LEGACY.get((major, level))
        if legacy is not None:
            yield f"{legacy}_{machine}"
    yield f"linux_{machine}"


def target_tags(python: str, platform: str, glibc: str = DEFAULT_GLIBC) -> dict[Tag, int]:
    """Every wheel tag CPython `python` (X.Y) on lockfile `platform` takes, mapped to its
    priority (0 is the most preferred)."""
    version = tuple(int(part) for part in python.split(".")[:2])
    machine = MACHINES.get(platform, platform.removeprefix("linux-"))
    platforms = list(_linux_platforms(machine, glibc))
    interpreter = f"cp{version[0]}{version[1]}"
    order = [
        *cpython_tags(version, platforms=platforms),
        *compatible_tags(version, interpreter, platforms),
    ]
    ranks: dict[Tag, int] = {}
    for rank, tag in enumerate(order):
        ranks.setdefault(tag, rank)
    return ranks


def _rank(artifact: Artifact, ranks: dict[Tag, int]) -> tuple[int, str]:
    """Wheels by their best tag's priority, then wheels the target cannot take, then sdists;
    the file name only breaks ties."""
    unfit = len(ranks)
    if artifact.kind != "wheel":
        return unfit + 1, artifact.filename
    try:
        tags = parse_wheel_filename(artifact.filename)[3]
    except InvalidWheelFilename:
        return unfit, artifact.filename
    return min((ranks.get(tag, unfit) for tag in tags), default=unfit), artifact.filename


def install_order(artifacts: Iterable[Artifact], lock: Lockfile) -> list[Artifact]:
    """`artifacts` in the order an installer prefers them for the lock's Python, platform and
    glibc (`__glibc`): best first."""
    glibc = locked_glibc(lock.cuda.virtual_packages)
    ranks = target_tags(lock.python, lock.platform, glibc)
    return sorted(artifacts, key=lambda a: _rank(a, ranks))


def preferred(artifacts: Sequence[Artifact], lock: Lockfile) -> Artifact:
    """The one file an install of the lock takes from `artifacts` (not empty)."""
    return install_order(artifacts, lock)[0]
