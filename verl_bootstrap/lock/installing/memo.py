"""What the last precheck of a lockfile found on these indexes, kept per user.

The precheck asks uv to look every locked artifact up (about a second even from uv's cache).
When the same lockfile, byte for byte, was checked against the same index settings before, the
files it found are taken again: a later run installs them by URL with `--require-hashes`, so the
installer still checks every byte against the lockfile's sha256, and a file an index has since
dropped fails that install and names itself. Anything that changes where packages come from
(the settings, a UV_* or PIP_* variable) makes another key.

The record is untrusted on read: its shape is checked, and it is used only when it names each
hash-checked distribution of the lockfile once, with a sha256 that the lockfile allows. URLs with
credentials in them are never written (the record would keep a secret).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlparse

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from verl_bootstrap.errors import CannotWrite
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.lock.format import LockedDist
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import atomic_write, cache_folder

__all__ = ["memo_key", "recall", "remember"]

# 2: the file is the one an installer takes for the lock's target (lock/wheelrank.py);
# records of 1 chose the first by file name (a pure any-wheel before a platform wheel), so they
# are not taken again
_SCHEMA = 2
_MAX_BYTES = 4 * 1024 * 1024  # a lockfile's artifact list is a few hundred kB at most
_ENV_PREFIXES = ("UV_", "PIP_")


def _plain_url(url: str) -> str:
    parts = urlparse(url)
    if parts.scheme not in ("http", "https", "file") or "@" in parts.netloc:
        raise ValueError("an http(s) or file URL without credentials")
    return url


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: Annotated[str, AfterValidator(_plain_url)] = Field(max_length=4096)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    kind: Literal["wheel", "sdist"]


class _Memo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[2]
    files: dict[str, _File]


def memo_key(lockfile: Path, settings: IndexSettings, environ: Mapping[str, str]) -> str:
    """The lockfile's bytes and everything that decides where its files come from."""
    where = {
        "index_url": settings.index_url,
        "extra_index_urls": list(settings.extra_index_urls),
        "find_links": list(settings.find_links),
        "named": sorted(settings.named.items()),
        "environment": sorted((k, v) for k, v in environ.items() if k.startswith(_ENV_PREFIXES)),
    }
    digest = hashlib.sha256(lockfile.read_bytes())
    digest.update(json.dumps(where, sort_keys=True).encode())
    return digest.hexdigest()


def _path(key: str) -> Path:
    return cache_folder("prechecks") / f"{key}.json"


def recall(key: str, dists: Sequence[LockedDist]) -> dict[str, Artifact] | None:
    """The files an earlier precheck chose for exactly these distributions (None: none kept, or
    the record does not fit them)."""
    path = _path(key)
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
        memo = _Memo.model_validate_json(raw) if len(raw) <= _MAX_BYTES else None
    except (OSError, ValidationError):
        return None
    if memo is None or set(memo.files) != {d.name for d in dists}:
        return None
    for dist in dists:
        if memo.files[dist.name].sha256 not in dist.hashes:
            return None
    return {n: Artifact(url=f.url, sha256=f.sha256, kind=f.kind) for n, f in memo.files.items()}


def remember(key: str, chosen: Mapping[str, Artifact]) -> None:
    """Keep what this precheck chose; a record that cannot be written is simply not kept."""
    if any("@" in urlparse(a.url).netloc for a in chosen.values()):
        return  # the URL holds credentials: never written to a file
    files = {name: {"url": a.url, "sha256": a.sha256, "kind": a.kind} for name, a in chosen.items()}
    path = _path(key)
    with contextlib.suppress(OSError, CannotWrite):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(path, json.dumps({"schema_version": _SCHEMA, "files": files}))
        path.chmod(0o600)
