"""Values from files become paths only through here: checked against a safe shape, kept inside.

A lockfile, a state file or an index answer may name a stage, a distribution or a file that the
tool later writes, deletes or unpacks. Each such value must match the shape of what it claims to
be (no `/`, no `..`, no leading `-` or `.`, no control characters), and the path built from it
must resolve inside the folder it was meant for, symlinks included.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

from verl_bootstrap.errors import InputError

__all__ = [
    "FILE_NAME",
    "PACKAGE_NAME",
    "PROFILE_NAME",
    "PYTHON_VERSION",
    "SHA256",
    "STAGE_ID",
    "VARIANT",
    "check",
    "control_char_at",
    "has_control_char",
    "inside",
    "is_loopback",
    "one_line",
]

# What profiles allow for stage ids (and the built-in steps' ids).
STAGE_ID = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
# Profile names: they name the env's folder by default. Letters, digits, '.', '_' and '-'.
PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Distribution names as PEP 508 allows them.
PACKAGE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$")
# One file name: sdists, wheels (local versions hold '+'), conda packages, exports.
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,254}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A CUDA variant as profiles name them.
VARIANT = re.compile(r"^(cpu|cu1[0-9]{2})$")
PYTHON_VERSION = re.compile(r"^3\.[0-9]{1,3}(\.[0-9]{1,3})?$")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def one_line(value: str, what: str = "value") -> str:
    """`value` when it holds no line break or other control character; else ValueError (pydantic
    reports it): such a value would add a line to a file it is written into, or drive a
    terminal it is printed on."""
    if not isinstance(value, str) or _CONTROL.search(value):
        raise ValueError(f"{what} must be one line with no control characters")
    return value


def has_control_char(value: str) -> bool:
    """Whether `value` holds a line break or another control character."""
    return bool(_CONTROL.search(value))


def control_char_at(value: object, where: str) -> str | None:
    """The field path (`where.key[0]`) of the first string in `value`, a JSON document, that
    holds a control character, or None. For files whose every value is one line."""
    if isinstance(value, str):
        return where if _CONTROL.search(value) else None
    if isinstance(value, dict):
        items = [(f"{where}.{k}", k) for k in value] + [
            (f"{where}.{k}", v) for k, v in value.items()
        ]
    elif isinstance(value, list | tuple):
        items = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    return next((at for path, v in items if (at := control_char_at(v, path))), None)


def check(value: str, shape: re.Pattern[str], what: str) -> str:
    """`value` when it has `shape`; else ValueError naming `what` (pydantic reports it)."""
    if not isinstance(value, str) or not shape.fullmatch(value):
        raise ValueError(f"{value!r} is not a valid {what}")
    return value


def relative_path(value: str, what: str) -> str:
    """`value` when it is a relative path of plain file names (`scripts/install.sh`): no `..`,
    no leading `/`, nothing a path could leave its folder by; else ValueError."""
    parts = value.split("/")
    if not value or any(not FILE_NAME.fullmatch(part) for part in parts):
        raise ValueError(f"{value!r} is not a valid {what} (a relative path of plain names)")
    return value


def inside(folder: Path, *parts: str, what: str = "file name") -> Path:
    """`folder/part/...`, each part a plain file name, resolving inside `folder`."""
    for part in parts:
        if not FILE_NAME.fullmatch(part):
            raise InputError(
                f"{part!r} is not a valid {what}: a path built from it would leave {folder}",
                hint="the file that named it was changed by hand or is not this tool's",
            )
    path = folder.joinpath(*parts)
    base = folder.resolve()
    if not path.resolve().is_relative_to(base):  # a symlink inside that points out
        raise InputError(
            f"{path} resolves outside {folder}; refusing to use it",
            hint=f"remove the symlink at {path}",
        )
    return path


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(url: str) -> bool:
    """Whether `url`'s host is this machine (plain http there crosses no network); False for
    what does not parse as a URL."""
    try:
        host = urlparse(url).hostname
    except ValueError:
        return False
    return (host or "").lower() in _LOOPBACK
