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
    # the deps stage's requirements from verl's extras, read from the checkout, with the
    # substitutions in place of verl's pins and what later stages install left out: requested
    # as they are, never as overrides (an override would erase every dependency's bound)
    verl_lines: tuple[str, ...] = ()
    # the stage resolves under verl's own [tool.uv] override-dependencies (read with its extras)
    verl_contract: bool = False

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
    if deps is None or not deps.extras:
        return tuple(specs)
    if not any(s.pins_from_verl for s in specs):  # verl's overrides hold for every stage still
        return tuple(replace(s, verl_contract=True) for s in specs)
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
        out.append(replace(done, verl_contract=True))
    return tuple(out)


def _with_extras(
    spec: StageSpec,
    upto: Sequence[StageSpec],
    later: Sequence[StageSpec],
    subs: tuple[Substitution, ...],
) -> StageSpec:
    """A stage whose resolution holds verl's extras: what later stages install is left out,
    and the substitutions replace verl's pins where its requirements are read (`stage_pins`)."""
    asked = {n for s in upto for n in _names(s.packages)}
    excluded = tuple(sorted({n for s in later for n in _names(s.packages)} - asked))
    return replace(
        spec,
        verl_extras=spec.extras if spec.kind == "verl-deps" else (),
        excluded=excluded,
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
