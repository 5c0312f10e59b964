"""A profile stage resolved for one CUDA variant: the concrete packages, flags and checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.profile.models import Profile, Stage

__all__ = ["StageSpec", "stage_specs"]


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


def stage_specs(profile: Profile, variant: str) -> tuple[StageSpec, ...]:
    """The profile's stages (the install-verl marker dropped) resolved for `variant`."""
    return tuple(
        _resolve(stage, variant, profile.protected)
        for stage in profile.stages
        if stage.kind != "install-verl"
    )


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
    )
