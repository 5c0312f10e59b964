"""The version diff of two lockfiles: each pin that differs, by name (`lock`, `update` show it)."""

from __future__ import annotations

from dataclasses import dataclass

from verl_bootstrap.lock.format import Lockfile

__all__ = ["VersionChange", "python_xy", "version_diff"]


@dataclass(frozen=True)
class VersionChange:
    """One package whose pin differs: old None means added, new None means removed."""

    name: str
    old: str | None
    new: str | None

    def line(self) -> str:
        """`name: old → new`, `name: added new` or `name: removed (was old)`."""
        if self.old is None:
            return f"{self.name}: added {self.new}"
        if self.new is None:
            return f"{self.name}: removed (was {self.old})"
        return f"{self.name}: {self.old} → {self.new}"


def version_diff(old: Lockfile, new: Lockfile) -> tuple[VersionChange, ...]:
    """Each pin that differs between two locks, by name: distributions, conda packages, Python
    and verl's source (its ref and commit or sdist)."""
    before, after = _pins(old), _pins(new)
    return tuple(
        VersionChange(name, before.get(name), after.get(name))
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    )


def _pins(lock: Lockfile) -> dict[str, str]:
    # verl is installed from its source: the env's lock lists it as a distribution, `lock` not
    pins = {n: d.version for n, d in lock.distributions().items() if n != "verl"}
    pins.update({f"conda:{p.name}": f"{p.version}={p.build}" for p in lock.conda})
    pinned = lock.verl.commit or lock.verl.sdist_sha256 or "?"
    pins["verl"] = f"{lock.verl.ref} ({lock.verl.kind} {pinned[:12]})"
    pins["python"] = python_xy(lock.python)  # the env's lock says 3.11.7, `lock` says 3.11
    return pins


def python_xy(version: str) -> str:
    """3.11.7 -> 3.11."""
    return ".".join(version.split(".")[:2])
