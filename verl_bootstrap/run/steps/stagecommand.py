"""A stage's install command, on either route: the request (the lockfile's hashed requirements,
or the stage's packages under the protected pins), the command shown and run, the protected pins
written before it, and a kernel stage's flow when it resolves."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import CommandFailed
from verl_bootstrap.events import emit
from verl_bootstrap.installer.cmdline import InstallRequest, install_command
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.kernels.build import WheelBuild
from verl_bootstrap.kernels.host import open_wheelhouse
from verl_bootstrap.kernels.kernelstage import KernelJob, ResolvingRoute, run_kernel_stage
from verl_bootstrap.kernels.progress import BuildProgress, chain
from verl_bootstrap.kernels.record import record_for_profile
from verl_bootstrap.kernels.sizing import read_resources
from verl_bootstrap.lock.installing.lockedsteps import locked_request
from verl_bootstrap.paths import atomic_write, kernel_dir, override_file, protected_file
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.run.steps.protect import protected_pins, refused_by_pins
from verl_bootstrap.run.steps.stepcontext import StepContext, run_cache_first, run_in_env
from verl_bootstrap.run.steps.verldeps import verl_pin, verl_requirement

__all__ = [
    "install_stage",
    "kernel_job",
    "log",
    "note",
    "overrides",
    "stage_argv",
    "stage_request",
    "with_progress",
]


def stage_request(plan: Plan, stage: StageSpec) -> InstallRequest:
    """The install a packages/verl-deps stage performs: --locked, the lockfile's hashed
    requirements (nothing resolved); else its packages, under the protected pins."""
    locked = locked_request(plan.prefix, stage, plan.locked_stage(stage.id), offline=plan.offline)
    return locked or _resolving_request(plan, stage)


def _resolving_request(plan: Plan, stage: StageSpec) -> InstallRequest:
    packages = stage.packages
    if stage.kind == "verl-deps" and stage.verl_lines:  # verl's extras, as plain requirements
        packages = (verl_requirement(()), *stage.verl_lines, *packages)
    elif stage.kind == "verl-deps":  # verl is installed editable by now: see run/steps/verldeps.py
        packages = (verl_requirement(stage.extras), *packages)
    pinned = stage.protect or stage.kind == "verl-deps" or bool(plan.profile.constraints)
    return InstallRequest(
        python=env_python(plan.prefix),
        packages=packages,
        index=stage.index,
        no_deps=stage.no_deps,
        no_build_isolation=stage.no_build_isolation,
        overrides_file=override_file(plan.prefix, stage.id) if overrides(stage) else None,
        constraints_file=protected_file(plan.prefix, stage.id) if pinned else None,
        offline=plan.offline,
    )


def _profile_constraints(constraints: Sequence[str], pins: Sequence[str]) -> list[str]:
    """The profile's constraints (verl's uv.lock pins, say) on a package no pin above holds:
    a protected package keeps the build an earlier stage installed."""
    held = {canonicalize_name(Requirement(p).name) for p in pins}
    return [c for c in constraints if canonicalize_name(Requirement(c).name) not in held]


def overrides(stage: StageSpec) -> tuple[str, ...]:
    """The stage's overrides, with those that leave out what a later stage installs."""
    return (*stage.overrides, *stage.exclusion_overrides())


def stage_argv(plan: Plan, stage: StageSpec) -> list[str]:
    """The stage's one command: shown (redacted) by the plan, run as it is by `execute`."""
    if stage.kind == "script":
        return ["bash", "-eE", "-o", "pipefail", str(plan.source.checkout / (stage.script or ""))]
    return install_command(plan.installer, stage_request(plan, stage), plan.settings)


def _cached_argv(ctx: StepContext, stage: StageSpec) -> list[str] | None:
    """A locked stage's install from uv's cache alone: every requirement is pinned by sha256."""
    plan = ctx.plan
    if not ctx.step.locked or plan.installer != "uv" or plan.offline or stage.kind == "script":
        return None
    request = replace(stage_request(plan, stage), offline=True)
    return install_command(plan.installer, request, plan.settings)


def install_stage(ctx: StepContext, stage: StageSpec) -> dict[str, Any] | None:
    """The stage's install; a resolving kernel stage's record of the wheel it took and from which
    source (None for any other stage)."""
    request = stage_request(ctx.plan, stage)
    if request.constraints_file:
        pins = protected_pins(ctx.protected, stage=stage.id)
        if stage.kind == "verl-deps":
            pins.append(
                verl_pin(installed(ctx.plan.prefix), ctx.plan.prefix, ctx.plan.source.checkout)
            )
        # nothing pinned yet (the first protected stage): the protected names with no version
        # are constraints that allow any, and keep uv from warning about an empty file
        pins = pins or sorted(ctx.plan.profile.protected)
        pins += _profile_constraints(ctx.plan.profile.constraints, pins)
        atomic_write(request.constraints_file, "".join(f"{pin}\n" for pin in pins))
    env = dict(ctx.step.env or stage.env)  # a kernel stage's sizing variables included
    try:
        if stage.kernel is not None and not ctx.step.locked:  # a locked kernel is taken above
            return run_kernel_stage(_resolving_route(ctx, stage, request, env))
        run_cache_first(ctx, _cached_argv(ctx, stage), stage_argv(ctx.plan, stage), env=env)
    except CommandFailed as failed:
        refused = refused_by_pins(ctx.protected, failed.tail, stage=stage.id)
        if refused is None:
            raise
        raise refused from failed
    return None


def kernel_job(
    ctx: StepContext, stage: StageSpec, python: Path, run: Callable[[list[str]], None]
) -> KernelJob:
    """What the kernel stage's flow needs from the step, on either route."""
    assert stage.kernel is not None
    return KernelJob(
        kernel=stage.kernel,
        python=python,
        installer=ctx.plan.installer,
        run=run,
        note=lambda line: note(ctx, line),
        wheelhouse=open_wheelhouse(ctx.plan.wheelhouse, os.environ),
        work=kernel_dir(ctx.plan.prefix, stage.id),
        gpu_present=ctx.plan.driver is not None,
        record=record_for_profile(ctx.plan.profile_ref),
        order=ctx.plan.kernel_sources,
        stage=stage.id,
    )


def with_progress(ctx: StepContext, stage: StageSpec) -> StepContext:
    """A kernel stage's context whose output lines also count compiled units (live progress)."""
    if stage.kernel is None:
        return ctx
    progress = BuildProgress(stage.id, stage.kernel.distribution)
    return replace(ctx, on_line=chain(ctx.on_line, progress))


def _resolving_route(
    ctx: StepContext, stage: StageSpec, request: InstallRequest, env: dict[str, str]
) -> ResolvingRoute:
    watched = with_progress(ctx, stage)

    def run(argv: list[str]) -> None:
        run_in_env(watched, argv, env=env)

    available_gb = read_resources().available_gb
    return ResolvingRoute(
        job=kernel_job(ctx, stage, request.python, run),
        packages=stage.packages,
        build=WheelBuild(request, ctx.plan.settings, env, run, available_gb),
    )


def log(ctx: StepContext, line: str) -> None:
    """A line in the step's log alone."""
    with ctx.log_path.open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def note(ctx: StepContext, line: str) -> None:
    """A line in the step's log and on the terminal."""
    with ctx.log_path.open("a", encoding="utf-8") as log:
        log.write(line + "\n")
    emit(line, kind=("note",), step=ctx.step.id)
