"""Whether a wheel can be what the build key it is filed under says: its file name's tags (Python,
platform; a pure `py3-none-any` wheel fits no kernel key) and its contents (a kernel's wheel holds
a compiled extension module, built for the key's Python). `wheelhouse add` refuses a wheel that
contradicts its key, and `wheelhouse check` names each such wheel of the index.

Only the archive's member list and each shared object's first bytes are read: the wheel is
someone else's file, and nothing of it is unpacked or run.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from verl_bootstrap.errors import InputError
from verl_bootstrap.kernels.key import BuildKey

__all__ = ["HouseCheck", "contradictions", "refuse_contradictions"]

_ELF = b"\x7fELF"
# `name.cpython-312-x86_64-linux-gnu.so`: the Python an extension module was built for
_CPYTHON_SUFFIX = re.compile(r"\.cpython-3(\d+)[^/]*\.so$")
_LINUX = re.compile(r"^(?:manylinux(?:_\d+_\d+|\d+)?|musllinux_\d+_\d+|linux)_(.+)$")
_MAX_MEMBERS = 100_000  # a wheel's member list is read whole: bound what a stranger's zip may hold


@dataclass(frozen=True)
class HouseCheck:
    """`wheelhouse check`'s findings: wheels missing, changed or skipped (`problems`), and wheels
    whose tags or contents contradict their key (`misfiled`, bad input: exit 2)."""

    problems: list[str] = field(default_factory=list)
    misfiled: list[str] = field(default_factory=list)

    @property
    def all(self) -> list[str]:
        """Every finding, misfiled wheels first."""
        return [*self.misfiled, *self.problems]


def refuse_contradictions(path: Path, key: BuildKey, *, file: str | None = None) -> None:
    """An InputError naming the file and the field when the wheel at `path` contradicts `key`."""
    found = contradictions(path, key, file=file)
    if found:
        raise InputError(
            "; ".join(found),
            hint="file a wheel under the key it was built for (its tags and extension modules "
            "say which), or build the kernel for this key",
        )


def contradictions(path: Path, key: BuildKey, *, file: str | None = None) -> list[str]:
    """Each way the wheel at `path` (named `file` in messages) contradicts `key`, as
    'FILE: FIELD: why'; empty when none does."""
    name = file or path.name
    try:
        tags = parse_wheel_filename(name)[3]
    except InvalidWheelFilename as exc:
        return [f"{name}: file name: not a wheel's ({exc})"]
    if all(t.abi == "none" and t.platform == "any" for t in tags):
        shown = ".".join(sorted({str(t) for t in tags}))
        return [
            f"{name}: tags: {shown} is a pure-Python wheel, which no kernel key fits (a kernel's "
            f"wheel holds compiled code for one Python and platform; the key says "
            f"{key.python} on {key.platform})"
        ]
    return [*_tag_problems(name, tags, key), *_content_problems(path, name, key)]


def _tag_problems(name: str, tags: frozenset[Tag], key: BuildKey) -> list[str]:
    problems = []
    if key.python and not any(_python_fits(t, key.python) for t in tags):
        said = ", ".join(sorted({t.interpreter for t in tags}))
        problems.append(f"{name}: python: the key says {key.python}, its tags say {said}")
    if key.platform and not any(_same_platform(t.platform, key.platform) for t in tags):
        said = ", ".join(sorted({t.platform for t in tags}))
        problems.append(f"{name}: platform: the key says {key.platform}, its tags say {said}")
    return problems


def _minor(python: str) -> int | None:
    """cp312 -> 12 (None for a tag that names no CPython 3 minor)."""
    return int(python[3:]) if re.fullmatch(r"cp3\d+", python) else None


def _python_fits(tag: Tag, python: str) -> bool:
    """A tag of this Python: its own, the stable ABI of an older one, or any Python 3."""
    if tag.interpreter in (python, "py3"):
        return True
    have, want = _minor(tag.interpreter), _minor(python)
    return tag.abi == "abi3" and have is not None and want is not None and have <= want


def _same_platform(tag: str, platform: str) -> bool:
    """manylinux_2_28_x86_64, manylinux2014_x86_64 and linux_x86_64 are all Linux on x86_64."""
    ours, theirs = _LINUX.match(tag), _LINUX.match(platform)
    if ours and theirs:
        return ours[1] == theirs[1]
    return tag == platform


def _content_problems(path: Path, name: str, key: BuildKey) -> list[str]:
    """No compiled extension module inside, or only ones built for another Python."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > _MAX_MEMBERS:
                return [f"{name}: contents: {len(members)} members, more than a wheel holds"]
            shared = [m.filename for m in members if _shared_object(archive, m)]
    except (zipfile.BadZipFile, OSError) as exc:
        return [f"{name}: contents: not a wheel archive ({exc})"]
    if not shared:
        return [
            f"{name}: contents: no compiled extension module (an ELF .so) inside, so it is no "
            "kernel's wheel"
        ]
    built = {f"cp3{m[1]}" for s in shared if (m := _CPYTHON_SUFFIX.search(s))}
    if key.python and built and key.python not in built:
        return [
            f"{name}: contents: its extension modules are built for {', '.join(sorted(built))}, "
            f"the key says {key.python}"
        ]
    return []


def _shared_object(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> bool:
    """A `.so` member that starts as an ELF file does."""
    base = member.filename.rsplit("/", 1)[-1]
    if not (base.endswith(".so") or ".so." in base) or member.is_dir():
        return False
    with archive.open(member) as handle:
        return handle.read(len(_ELF)) == _ELF
