"""Per-release stacks: an older verl ref gets the stack its release was made for."""

from __future__ import annotations

from installer.errors import InputError
from installer.profile.models import Profile

__all__ = ["apply_stack", "supported_refs"]


def supported_refs(profile: Profile) -> list[str]:
    """Refs the profile has a stack for: its own ref, then every stack's refs."""
    refs = [profile.verl.ref]
    for stack in profile.stacks:
        refs.extend(r for r in stack.refs if r not in refs)
    return refs


def apply_stack(profile: Profile, ref: str | None, *, allow_unsupported: bool = False) -> Profile:
    """The profile as it applies to verl `ref` (None: the profile's own ref)."""
    wanted = ref or profile.verl.ref
    if wanted == profile.verl.ref:
        return profile
    stack = next((s for s in profile.stacks if wanted in s.refs), None)
    if stack is None:
        if allow_unsupported:
            return profile.model_copy(
                update={"verl": profile.verl.model_copy(update={"ref": wanted})}
            )
        raise InputError(
            f"profile {profile.name!r} has no stack for verl ref {wanted!r}",
            hint=f"supported refs: {', '.join(supported_refs(profile))}; "
            "--allow-unsupported-ref installs today's stack at that ref (recorded in the lockfile)",
        )
    update: dict[str, object] = {"verl": profile.verl.model_copy(update={"ref": wanted})}
    for name in ("python", "stages", "verify", "protected"):
        value = getattr(stack, name)
        if value is not None:
            update[name] = value
    return profile.model_copy(update=update)
