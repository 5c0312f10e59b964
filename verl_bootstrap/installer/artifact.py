"""The files an index serves for a locked version, as the installer sees them, and the kinds of
source a locked distribution installs from (the lock format records them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

__all__ = ["Artifact", "DistSource", "Served"]

DistSource = Literal["wheel", "sdist", "git", "editable"]


@dataclass(frozen=True)
class Artifact:
    """One file an index serves."""

    url: str
    sha256: str
    kind: str  # wheel | sdist
    size: int | None = None
    upload_time: str | None = None

    @property
    def filename(self) -> str:
        """The file's name (the last part of its URL, decoded: a find-links page writes
        `torch-2.8.0%2Bcpu-...whl` for the `+` of a local version)."""
        return unquote(self.url.rsplit("/", 1)[-1].split("#", 1)[0].split("?", 1)[0])


Served = Mapping[str, Sequence[Artifact]]  # canonical name -> artifacts of the locked version
