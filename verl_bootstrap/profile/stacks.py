"""Per-release stacks: an older verl ref gets the stack its release was made for."""

from __future__ import annotations

from datetime import date

from verl_bootstrap.errors import InputError
from verl_bootstrap.profile.models import Profile, Stack, Stage

__all__ = ["EXCLUDE_NEWER_ENV", "apply_stack", "stack_for", "supported_refs"]

# The variables uv and pip read for "only distributions uploaded before this time".
EXCLUDE_NEWER_ENV = ("UV_EXCLUDE_NEWER", "PIP_UPLOADED_PRIOR_TO")


def supported_refs(profile: Profile) -> list[str]:
    """Refs the profile has a stack for: its own ref, then every stack's refs."""
    refs = [profile.verl.ref]
    for stack in profile.stacks:
        refs.extend(r for r in stack.refs if r not in refs)
    return refs


def stack_for(profile: Profile, ref: str) -> Stack | None:
    """The stack that covers `ref` (None for the profile's own ref and for unknown refs)."""
    return next((s for s in profile.stacks if ref in s.refs), None)


def apply_stack(
    profile: Profile,
    ref: str | None,
    *,
    allow_unsupported: bool = False,
    options: frozenset[str] = frozenset(),
) -> Profile:
    """The profile as it applies to verl `ref` (None: the profile's own ref).

    A ref no stack covers is refused with the supported refs, unless `allow_unsupported`: then
    the profile's own stack is used at that ref (the lockfile records that choice). Stages of an
    option (`option: tests`) stay only when `options` names it.
    """
    at_ref = _at_ref(profile, ref, allow_unsupported=allow_unsupported)
    kept = tuple(s for s in at_ref.stages if s.option is None or s.option in options)
    return at_ref if kept == at_ref.stages else at_ref.model_copy(update={"stages": kept})


def _at_ref(profile: Profile, ref: str | None, *, allow_unsupported: bool) -> Profile:
    wanted = ref or profile.verl.ref
    if wanted == profile.verl.ref:
        if profile.exclude_newer is None:
            return profile
        return profile.model_copy(
            update={"stages": _cut_off(profile.stages, profile.exclude_newer)}
        )
    stack = stack_for(profile, wanted)
    at_ref = {"verl": profile.verl.model_copy(update={"ref": wanted})}
    if stack is None:
        if allow_unsupported:
            return profile.model_copy(update=at_ref)
        refs = supported_refs(profile)
        close = f"v{wanted}" if f"v{wanted}" in refs else None  # a tag written without its v
        raise InputError(
            f"profile {profile.name!r} has no stack for verl ref {wanted!r}"
            + (f"; did you mean {close}?" if close else ""),
            hint=f"supported refs: {', '.join(supported_refs(profile))}; "
            "--allow-unsupported-ref installs today's stack at that ref (recorded in the lockfile)",
            data={"profile": profile.name, "ref": wanted, "suggestion": close, "supported": refs},
        )
    update: dict[str, object] = dict(at_ref)
    for name in ("python", "cuda_variants", "verify", "protected"):
        value = getattr(stack, name)
        if value is not None:
            update[name] = value
    stages = profile.stages if stack.stages is None else stack.stages
    if stack.exclude_newer is not None:
        stages = _cut_off(stages, stack.exclude_newer)
    update["stages"] = stages
    return profile.model_copy(update=update)


def _cut_off(stages: tuple[Stage, ...], day: date) -> tuple[Stage, ...]:
    """Each installing stage resolves only what was uploaded before `day` (a stage's own wins).

    A stage bound to a named index is left alone: such indexes (PyTorch's, for one) publish no
    upload times, and uv drops every file without one once a cutoff is set. Those stages pin
    their packages exactly, and later stages accept what is already installed.
    """
    stamp = f"{day.isoformat()}T00:00:00Z"
    cut = {name: stamp for name in EXCLUDE_NEWER_ENV}
    return tuple(
        stage
        if stage.kind == "install-verl" or stage.index
        else stage.model_copy(update={"env": {**cut, **stage.env}})
        for stage in stages
    )
