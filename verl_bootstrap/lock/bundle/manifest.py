"""A bundle's manifest: what the archive holds and the host it fits.

A bundle is one uncompressed tar (the wheels inside are compressed already) whose FIRST member is
`manifest.json`: the host can be checked against it before a single other byte is read, and every
later member is checked against the sha256 it lists.

The manifest is a regular member of at most MAX_MANIFEST_BYTES, read only after its size is
checked; every field has a shape (glibc and Python versions, sha256 values, member paths that
stay inside the bundle and never nest in one another, kernel wheels at kernels/FILE.whl and
nothing else there), and the lockfile it names is one of its members whose sha256 is
`lockfile_sha256`. Anything else is bad input naming the field.
"""

from __future__ import annotations

import json
import re
import stat
import tarfile
import zlib
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verl_bootstrap.errors import InputError, field_problems, said_of
from verl_bootstrap.safety import jsontext

__all__ = [
    "BUNDLE_SCHEMA_VERSION",
    "MANIFEST_NAME",
    "MAX_MANIFEST_BYTES",
    "Manifest",
    "Member",
    "Role",
    "dump_manifest",
    "parse_manifest",
    "read_manifest",
    "regular_member",
]

BUNDLE_SCHEMA_VERSION: Final = 1
MANIFEST_NAME: Final = "manifest.json"
MAX_MANIFEST_BYTES: Final = 16 << 20  # ~100 bytes a member: far more members than any lock has
_SHA256 = re.compile(r"[0-9a-f]{64}")
_PYTHON = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?")
_GLIBC = re.compile(r"[0-9]+\.[0-9]+")
Role = Literal["lockfile", "artifact", "build", "conda", "kernel", "verl-source", "tool", "script"]
_KERNEL_PATH = re.compile(r"kernels/[^/]+\.whl")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Member(_Strict):
    """One file of the bundle."""

    path: str = Field(description="Its path inside the archive (relative, no '..')")
    sha256: str
    size: int
    role: Role
    name: str | None = Field(default=None, description="The distribution it is (artifacts)")


class Manifest(_Strict):
    """What a bundle holds and what it was made for."""

    schema_version: Literal[1] = BUNDLE_SCHEMA_VERSION
    created_by: str
    lockfile: str = Field(description="The lockfile's member path")
    lockfile_sha256: str
    profile: str
    variant: str
    platform: str
    python: str
    glibc: str | None = None
    backend: str
    verl_kind: Literal["git", "sdist"]
    verl_commit: str | None = None
    members: tuple[Member, ...]

    def by_path(self) -> dict[str, Member]:
        """Members by their path in the archive."""
        return {m.path: m for m in self.members}


def read_manifest(archive: Path) -> Manifest:
    """The manifest of `archive`, read from its first member only (nothing is unpacked)."""
    _check_is_file(archive)
    try:
        with tarfile.open(archive, mode="r|") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST_NAME or not regular_member(first):
                raise InputError(
                    f"{archive}: not a verl-bootstrap bundle (its first member is not a plain "
                    f"file named {MANIFEST_NAME})",
                    hint="make one with `verl-bootstrap bundle --lockfile L`",
                )
            if first.size > MAX_MANIFEST_BYTES:
                raise InputError(
                    f"{archive}: its {MANIFEST_NAME} is {first.size} bytes, more than a manifest "
                    f"may be ({MAX_MANIFEST_BYTES})",
                    hint="make the bundle again with `verl-bootstrap bundle`",
                )
            handle = tar.extractfile(first)
            assert handle is not None  # a regular file always has one
            text = handle.read(first.size)
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        raise InputError(
            f"{archive}: cannot read bundle: {exc}",
            hint="it is damaged or cut short: copy it again from where it was made",
        ) from None
    if len(text) != first.size:
        raise InputError(
            f"{archive}: cut short inside its {MANIFEST_NAME}",
            hint="copy it again from where it was made",
        )
    return parse_manifest(text, archive)


def regular_member(info: tarfile.TarInfo) -> bool:
    """A plain file's member: not a link, device, FIFO or folder, and not sparse (whose declared
    size can be far more than the archive holds)."""
    return info.type in (tarfile.REGTYPE, tarfile.AREGTYPE) and not info.issparse()


def _check_is_file(archive: Path) -> None:
    """A bundle is a regular file: a FIFO would block the read forever, a folder cannot be one."""
    try:
        mode = archive.stat().st_mode
    except OSError as exc:
        raise InputError(f"{archive}: cannot read bundle: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise InputError(
            f"{archive}: not a bundle file (it is a folder, a named pipe, a socket or a device)",
            hint="pass the bundle's .tar file",
        )


def parse_manifest(text: bytes, origin: Path) -> Manifest:
    """Validate a manifest's JSON; errors name the bundle and the field."""
    try:
        data = jsontext.loads(text)
    except ValueError as exc:
        raise InputError(f"{origin}: {MANIFEST_NAME} is not JSON: {exc}") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != BUNDLE_SCHEMA_VERSION:
        raise InputError(
            f"{origin}: bundle schema_version {version!r} is not supported "
            f"(this verl-bootstrap reads {BUNDLE_SCHEMA_VERSION})",
            hint="make the bundle again with this verl-bootstrap",
        )
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        problems = field_problems(exc.errors())
        raise InputError(
            f"{origin}: invalid {MANIFEST_NAME}: {said_of(problems)}",
            data={"file": MANIFEST_NAME, "fields": problems},
        ) from None
    _check_fields(manifest, origin)
    paths = [member.path for member in manifest.members]
    for member in manifest.members:
        _check_member_path(member.path, origin)
        _check_member(member, origin)
    _check_no_nesting(paths, origin)
    _check_lockfile(manifest, origin)
    return manifest


def _bad(origin: Path, field: str, value: object, shape: str) -> InputError:
    return _invalid(origin, field, f"{value!r} is not {shape}")


def _invalid(origin: Path, field: str, problem: str) -> InputError:
    """The manifest's `field` is wrong: said as the schema's own errors are, and as their data."""
    return InputError(
        f"{origin}: invalid {MANIFEST_NAME}: {field} {problem}",
        hint="make the bundle again with `verl-bootstrap bundle`",
        data={"file": MANIFEST_NAME, "fields": [{"field": field, "problem": problem}]},
    )


def _check_fields(manifest: Manifest, origin: Path) -> None:
    if not _PYTHON.fullmatch(manifest.python):
        raise _bad(origin, "python", manifest.python, "a Python version (X.Y or X.Y.Z)")
    if manifest.glibc is not None and not _GLIBC.fullmatch(manifest.glibc):
        raise _bad(origin, "glibc", manifest.glibc, "a glibc version (X.Y)")
    if not _SHA256.fullmatch(manifest.lockfile_sha256):
        raise _bad(origin, "lockfile_sha256", manifest.lockfile_sha256, "a sha256 (64 hex digits)")


def _check_member(member: Member, origin: Path) -> None:
    if not _SHA256.fullmatch(member.sha256):
        raise _bad(origin, f"members[{member.path!r}].sha256", member.sha256, "a sha256")
    if member.size < 0:
        raise _bad(origin, f"members[{member.path!r}].size", member.size, "a size in bytes")
    where = f"members[{member.path!r}]"
    if (member.role == "kernel") != member.path.startswith("kernels/"):
        raise _bad(origin, f"{where}.role", member.role, "kernel, the role of kernels/ alone")
    if member.role == "kernel" and not _KERNEL_PATH.fullmatch(member.path):
        raise _bad(origin, f"{where}.path", member.path, "a kernel wheel's (kernels/FILE.whl)")


def _check_no_nesting(paths: list[str], origin: Path) -> None:
    """Each member is one file: no path twice, none a folder of another."""
    seen: set[str] = set()
    for path in sorted(paths, key=lambda p: (p.count("/"), p)):
        parts = path.split("/")
        folders = {"/".join(parts[:n]) for n in range(1, len(parts))}
        clash = sorted((folders | {path}) & seen)
        if clash:
            raise _invalid(
                origin,
                f"member {path!r}",
                f"clashes with member {clash[0]!r} (a path listed twice, or a file that is also "
                "a folder)",
            )
        seen.add(path)


def _check_lockfile(manifest: Manifest, origin: Path) -> None:
    """The lockfile the bundle installs is one of its members, with the sha256 it states."""
    member = manifest.by_path().get(manifest.lockfile)
    if member is None or member.role != "lockfile":
        raise _bad(origin, "lockfile", manifest.lockfile, "one of its members of role lockfile")
    if member.sha256 != manifest.lockfile_sha256:
        raise _invalid(
            origin,
            "lockfile_sha256",
            f"{manifest.lockfile_sha256} is not the sha256 its member {member.path} is listed "
            f"with ({member.sha256})",
        )


def _check_member_path(path: str, origin: Path) -> None:
    """A member's path stays inside the folder it is unpacked into."""
    parts = path.split("/")
    odd = any(p in ("", ".", "..") for p in parts) or "\\" in path or "\0" in path
    if odd or path.startswith("/") or path == MANIFEST_NAME:
        raise InputError(f"{origin}: {MANIFEST_NAME} lists a member outside the bundle: {path!r}")


def dump_manifest(manifest: Manifest) -> bytes:
    """The manifest's bytes (sorted keys: the same bundle gives the same manifest)."""
    body = manifest.model_dump(mode="json", exclude_none=True)
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()
