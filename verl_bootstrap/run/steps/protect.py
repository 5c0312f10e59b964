"""Protected packages: once a stage installs torch or the cuDNN wheel, no later stage changes it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from packaging.utils import canonicalize_name

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.installer.envs.inventory import Dist

__all__ = ["check_protected", "protected_pins", "refused_by_pins"]


def check_protected(
    recorded: dict[str, dict[str, str]],
    now: Mapping[str, Dist],
    *,
    stage: str,
    names: Iterable[str],
) -> dict[str, dict[str, str]]:
    """Record protected packages the first time they appear; fail when a later stage changes one.

    Returns the updated record (a new dict: the caller persists it).
    """
    updated = dict(recorded)
    for name in (canonicalize_name(n) for n in names):
        dist = now.get(name)
        before = recorded.get(name)
        if before is None or before.get("stage") == stage:
            # first sight, or the stage that installed it ran again because its inputs changed
            if dist is not None:
                updated[name] = _entry(dist, stage)
            else:
                updated.pop(name, None)
            continue
        if dist is None or dist.version != before["version"] or _rebuilt(dist, before):
            raise StepFailed(_message(name, before, dist, stage), hint=_HINT)
    return updated


_HINT = (
    "pin the package in this stage to the protected version, or move the stage that needs another "
    "version earlier (the inference engine decides torch; later stages install against it)"
)


def _entry(dist: Dist, stage: str) -> dict[str, str]:
    return {"version": dist.version, "record": dist.record_sha256 or "", "stage": stage}


def _rebuilt(dist: Dist, before: Mapping[str, str]) -> bool:
    return bool(before.get("record")) and dist.record_sha256 != before["record"]


def _message(name: str, before: Mapping[str, str], dist: Dist | None, stage: str) -> str:
    was = f"{name} {before['version']} (installed by stage {before['stage']!r})"
    if dist is None:
        return f"stage {stage!r} removed protected package {was}"
    if dist.version == before["version"]:
        return f"stage {stage!r} replaced protected package {was} with another build"
    return f"stage {stage!r} changed protected package {was} to {dist.version}"


def _held_elsewhere(
    recorded: Mapping[str, Mapping[str, str]], stage: str
) -> dict[str, Mapping[str, str]]:
    """The protected packages another stage installed (the owner may still change its own)."""
    return {n: e for n, e in sorted(recorded.items()) if e.get("stage") != stage}


def protected_pins(recorded: Mapping[str, Mapping[str, str]], *, stage: str) -> list[str]:
    """`name==version` for each protected package another stage installed: the stage's constraints.

    Passed to the resolver, they keep a stage from replacing torch at all, rather than catching
    the replacement afterwards.
    """
    return [f"{n}=={e['version']}" for n, e in _held_elsewhere(recorded, stage).items()]


def refused_by_pins(
    recorded: Mapping[str, Mapping[str, str]], output: Iterable[str], *, stage: str
) -> StepFailed | None:
    """The error to give when the resolver refused a stage because of protected pins, if it did."""
    text = "\n".join(output).lower()
    held = _held_elsewhere(recorded, stage)
    names = [n for n, e in held.items() if f"{n}=={e['version']}".lower() in text]
    if not names:
        return None
    what = ", ".join(
        f"{n} {held[n]['version']} (installed by stage {held[n]['stage']!r})" for n in names
    )
    return StepFailed(
        f"stage {stage!r} needs another version of protected package {what}; "
        "the resolver refused it, so nothing in the env was changed",
        hint=_HINT,
    )
