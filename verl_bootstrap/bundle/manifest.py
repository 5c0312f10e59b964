"""A bundle's manifest: what the archive holds and the host it fits.

A bundle is one uncompressed tar (the wheels inside are compressed already) whose FIRST member is
`manifest.json`: the host can be checked against it before a single other byte is read, and every
later member is checked against the sha256 it lists.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verl_bootstrap.errors import InputError

__all__ = [
    "BUNDLE_SCHEMA_VERSION",
    "MANIFEST_NAME",
    "Manifest",
    "Member",
    "Role",
    "dump_manifest",
    "parse_manifest",
    "read_manifest",
]

BUNDLE_SCHEMA_VERSION: Final = 1
MANIFEST_NAME: Final = "manifest.json"
Role = Literal["lockfile", "artifact", "build", "conda", "verl-source", "tool", "script"]


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
    try:
        with tarfile.open(archive, mode="r|") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST_NAME or not first.isfile():
                raise InputError(
                    f"{archive}: not a verl-bootstrap bundle (its first member is not "
                    f"{MANIFEST_NAME})",
                    hint="make one with `verl-bootstrap bundle --lockfile L`",
                )
            handle = tar.extractfile(first)
            assert handle is not None  # a regular file always has one
            text = handle.read(first.size)
    except (OSError, tarfile.TarError) as exc:
        raise InputError(f"{archive}: cannot read bundle: {exc}") from None
    return parse_manifest(text, archive)


def parse_manifest(text: bytes, origin: Path) -> Manifest:
    """Validate a manifest's JSON; errors name the bundle and the field."""
    try:
        data = json.loads(text)
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
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InputError(f"{origin}: invalid {MANIFEST_NAME}: {fields}") from None
    for member in manifest.members:
        _check_member_path(member.path, origin)
    return manifest


def _check_member_path(path: str, origin: Path) -> None:
    """A member's path stays inside the folder it is unpacked into."""
    parts = Path(path).parts
    if not parts or Path(path).is_absolute() or ".." in parts or path == MANIFEST_NAME:
        raise InputError(f"{origin}: {MANIFEST_NAME} lists a member outside the bundle: {path!r}")


def dump_manifest(manifest: Manifest) -> bytes:
    """The manifest's bytes (sorted keys: the same bundle gives the same manifest)."""
    body = manifest.model_dump(mode="json", exclude_none=True)
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()
