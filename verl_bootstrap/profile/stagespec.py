"""A profile stage resolved for one CUDA variant: the concrete packages, flags and checks."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.profile.models import Profile, Stage, Substitution

__all__ = ["DROPPED_MARKER", "StageSpec", "stage_specs"]

# A marker no machine has: an override carrying it removes every requirement on the package
# (verl's own pyproject drops flash-attn-4 the same way).
DROPPED_MARKER = "platform_machine == 'verl-bootstrap-left-out'"


@dataclass(frozen=True)
class StageSpec:
    """Everything one accelerator stage needs, with per-variant values already applied."""

    id: str
    kind: str  # packages | verl-deps | script
    description: str
    packages: tuple[str, ...]
    extras: tuple[str, ...] = ()
    script: str | None = None
    index: str | None = None
    no_build_isolation: bool = False
    no_deps: bool = False
    overrides: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    expect: Mapping[str, str] = field(default_factory=dict)
    protect: tuple[str, ...] = ()  # protected packages this stage may install
    kernel: KernelSpec | None = None  # a stage that compiles native code against torch
    # verl's extras (its deps stage's), where a stage takes what they declare: the deps stage
    # itself, and a `pins_from_verl` stage (whose bare package names get verl's pins)
    verl_extras: tuple[str, ...] = ()
    pins_from_verl: bool = False
    # what a later stage installs: left out of this stage's resolution of verl's extras
    excluded: tuple[str, ...] = ()
    # where this variant differs from verl's extras (from the deps stage on, and pinned stages)
    substitutions: tuple[Substitution, ...] = ()

    def promised(self) -> tuple[str, ...]:
        """The packages, after the exact versions the stage promises (`expect`): a stage that
        takes verl's pins names `torch` bare, and says the torch it leaves as `torch: ==2.11.0`
        (kernel keys are read from this before verl's pyproject.toml is fetched)."""
        exact = (f"{n}{spec}" for n, spec in self.expect.items() if spec.startswith("=="))
        return (*exact, *self.packages)

    def exclusion_overrides(self) -> tuple[str, ...]:
        """Overrides that drop what a later stage installs (never carried to later stages)."""
        return tuple(f"{name} ; {DROPPED_MARKER}" for name in self.excluded)


def stage_specs(profile: Profile, variant: str) -> tuple[StageSpec, ...]:
    """The profile's stages (the install-verl marker dropped) resolved for `variant`.

    Where a stage takes verl's pins (`pins_from_verl`), the verl-deps stage's extras are split
    across the stages: every stage from the deps stage on resolves with them, each leaves out
    what a later stage installs (compiled parts and pins come in their own stages, in the
    profile's order), and the variant's substitutions apply.
    """
    specs = [
        _resolve(stage, variant, profile.protected)
        for stage in profile.stages
        if stage.kind != "install-verl"
    ]
    deps = next((s for s in specs if s.kind == "verl-deps"), None)
    # a profile splits verl's extras across its stages once a stage takes verl's pins (the GPU
    # profiles' engine); one that only asks for them in its deps stage (cpu) installs them there
    if deps is None or not deps.extras or not any(s.pins_from_verl for s in specs):
        return tuple(specs)
    subs = tuple(s for s in profile.substitutions if not s.variants or variant in s.variants)
    out: list[StageSpec] = []
    holds_extras = False
    for number, spec in enumerate(specs):
        holds_extras = holds_extras or spec.kind == "verl-deps"
        done = (
            _with_extras(spec, specs[: number + 1], specs[number + 1 :], subs)
            if holds_extras
            else spec
        )
        if done.pins_from_verl:
            done = replace(done, verl_extras=deps.extras, substitutions=subs)
        out.append(done)
    return tuple(out)


def _with_extras(
    spec: StageSpec,
    upto: Sequence[StageSpec],
    later: Sequence[StageSpec],
    subs: tuple[Substitution, ...],
) -> StageSpec:
    """A stage whose resolution holds verl's extras: what later stages install is left out,
    and each substitution replaces (same name) or drops (another name, or none) verl's pin."""
    asked = {n for s in upto for n in _names(s.packages)}
    excluded = tuple(sorted({n for s in later for n in _names(s.packages)} - asked))
    overrides = list(spec.overrides)
    packages = list(spec.packages)
    for sub in subs:
        name = _name(sub.replace)
        if name in excluded:
            continue
        if sub.by is not None and _name(sub.by) == name:
            overrides.append(sub.by)
            continue
        overrides.append(f"{name} ; {DROPPED_MARKER}")
        if sub.by is not None and spec.kind == "verl-deps" and _name(sub.by) not in asked:
            packages.append(sub.by)
    return replace(
        spec,
        verl_extras=spec.extras if spec.kind == "verl-deps" else (),
        excluded=excluded,
        overrides=tuple(overrides),
        packages=tuple(packages),
        substitutions=subs,
    )


def _name(spec: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _names(specs: Sequence[str]) -> set[str]:
    return {_name(s) for s in specs}


def _resolve(stage: Stage, variant: str, protected: tuple[str, ...]) -> StageSpec:
    override = stage.variants.get(variant)
    packages = stage.packages
    overrides = stage.overrides
    expect = dict(stage.expect)
    if override is not None:
        packages = override.packages if override.packages is not None else packages
        overrides = override.overrides if override.overrides is not None else overrides
        expect.update(override.expect or {})
    return StageSpec(
        id=stage.id,
        kind=stage.kind,
        description=stage.description,
        packages=packages,
        extras=stage.extras,
        script=stage.script,
        index=stage.index,
        no_build_isolation=stage.no_build_isolation,
        no_deps=stage.no_deps,
        overrides=overrides,
        env=dict(stage.env),
        expect=expect,
        protect=protected,
        kernel=stage.kernel,
        pins_from_verl=stage.pins_from_verl,
    )
