"""A stage installed from the lockfile (--locked): its hashed requirements, its locked sdists
built here into wheels first, and a kernel stage that takes the first prebuilt wheel whose modules
load before it builds the locked sdist."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.kernels.host import open_bundled
from verl_bootstrap.lock.format import LockedStage
from verl_bootstrap.lock.installing.kernelrun import LockedRoute, run_locked_kernel
from verl_bootstrap.lock.installing.kernels import kernel_dist
from verl_bootstrap.lock.installing.lockedsteps import locked_requirements, write_build_constraints
from verl_bootstrap.paths import atomic_write, cache_folder, locked_requirements_file
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.run.steps.srcbuild import build_locked_sdists
from verl_bootstrap.run.steps.stagecommand import (
    install_stage,
    kernel_job,
    log,
    stage_request,
    with_progress,
)
from verl_bootstrap.run.steps.stepcontext import StepContext, run_in_env

__all__ = ["install_locked_kernel", "locked_stage_requirements"]


def install_locked_kernel(
    ctx: StepContext, stage: StageSpec, locked: LockedStage
) -> tuple[dict[str, Artifact], Mapping[str, Any] | None]:
    """A locked kernel stage: installed with the first wheel its sources offer whose modules
    load (a prebuilt wheel that does not is uninstalled and the stage installed again with the
    next one), at last from the locked sdist built here (kernels/stage, the one kernel flow)."""
    assert stage.kernel is not None
    write_build_constraints(ctx.plan.prefix, locked)

    def install(wheels: dict[str, Artifact], held: tuple[str, ...]) -> None:
        _write_locked_requirements(ctx, locked, wheels, held)
        install_stage(ctx, stage)

    route = LockedRoute(
        job=kernel_job(ctx, stage, env_python(ctx.plan.prefix), lambda argv: run_in_env(ctx, argv)),
        stage=locked,
        dist=kernel_dist(locked, stage.kernel),
        artifacts=ctx.plan.locked_artifacts,
        build=lambda given: _build_locked_sdists(ctx, stage, locked, given),
        install_stage=install,
        online=not ctx.plan.options.offline,
        bundled=open_bundled(bundle) if (bundle := ctx.plan.bundle_kernels) else None,
    )
    built, kernel = run_locked_kernel(route)
    return built, kernel or None


def locked_stage_requirements(
    ctx: StepContext, stage: StageSpec, locked: LockedStage
) -> dict[str, Artifact]:
    """A locked stage's hashed requirements, its sdists built into wheels first; the wheels (a
    stage's kernel is taken by `install_locked_kernel`)."""
    write_build_constraints(ctx.plan.prefix, locked)
    built: dict[str, Artifact] = {}
    if stage.kind != "script":
        built = _build_locked_sdists(ctx, stage, locked, ctx.plan.locked_artifacts)
    _write_locked_requirements(ctx, locked, built)
    return built


def _write_locked_requirements(
    ctx: StepContext,
    locked: LockedStage,
    wheels: Mapping[str, Artifact],
    held: tuple[str, ...] = (),
) -> None:
    """A locked stage's hashed requirements: its sdists replaced by the wheels built here (and a
    kernel's by the wheel taken), leaving out the parts a kernel's whole wheel holds."""
    atomic_write(
        locked_requirements_file(ctx.plan.prefix, locked.id),
        locked_requirements(locked, ctx.plan.locked_artifacts, wheels, leave_out=held),
    )


def _build_locked_sdists(
    ctx: StepContext, stage: StageSpec, locked: LockedStage, artifacts: Mapping[str, Artifact]
) -> dict[str, Artifact]:
    """The stage's locked sdists, built here into wheels that the stage then installs."""
    watched, env = (
        with_progress(ctx, stage),
        dict(ctx.step.env or stage.env),
    )  # a kernel's sizing too
    return build_locked_sdists(
        locked,
        artifacts,
        prefix=ctx.plan.prefix,
        request=stage_request(ctx.plan, stage),
        settings=ctx.plan.settings,
        cache=cache_folder(),
        run=lambda argv: run_in_env(watched, argv, env=env),
        log=lambda line: log(ctx, line),
    )
