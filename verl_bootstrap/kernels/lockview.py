"""What a kernel stage's choice reads of a lockfile, as protocols: the lock's own models (its
`LockedDist`, `LockedStage` and `KernelWheel`) meet them, so the kernel choice stands below the
lock capability that calls it, and never imports the lock format it is handed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["LockedKernelDist", "LockedKernelStage", "PinnedKernelWheel"]


class _StatedKey(Protocol):
    def model_dump(self) -> dict[str, Any]: ...


class PinnedKernelWheel(Protocol):
    """The very wheel a lockfile records for a kernel stage."""

    @property
    def file(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def url(self) -> str | None: ...
    @property
    def key(self) -> _StatedKey: ...
    @property
    def distribution(self) -> str | None: ...
    @property
    def replaces(self) -> tuple[str, ...]: ...


class LockedKernelDist(Protocol):
    """The kernel's locked distribution."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def source(self) -> str | None: ...
    @property
    def kernel_wheel(self) -> PinnedKernelWheel | None: ...


class LockedKernelStage(Protocol):
    """The kernel's locked stage: its versions stand in for the stage's pins."""

    @property
    def distributions(self) -> Sequence[LockedKernelDist]: ...
