"""Steps `stage` and `script`: one accelerator stage of the profile (or of the lockfile).

A `stage` installs packages with uv or pip, under the protected-package pins of earlier stages;
a `script` runs a script from verl's checkout. Both are checked afterwards against what they
promise (`expect`) and against the protected packages.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from verl_bootstrap.envs.base import env_python
from verl_bootstrap.envs.inventory import installed
from verl_bootstrap.errors import CommandFailed, StepFailed
from verl_bootstrap.events import emit
from verl_bootstrap.installer.cmdline import InstallRequest, install_command
from verl_bootstrap.installer.lookup import Artifact
from verl_bootstrap.kernels.build import WheelBuild
from verl_bootstrap.kernels.host import open_bundled, open_wheelhouse
from verl_bootstrap.kernels.progress import BuildProgress, chain
from verl_bootstrap.kernels.record import record_for_profile
from verl_bootstrap.kernels.sizing import read_resources
from verl_bootstrap.kernels.stage import KernelJob, ResolvingRoute, run_kernel_stage
from verl_bootstrap.lockfile.model import LockedStage
from verl_bootstrap.lockinstall.install import (
    locked_request,
    locked_requirements,
    write_build_constraints,
)
from verl_bootstrap.lockinstall.kernelrun import LockedRoute, run_locked_kernel
from verl_bootstrap.lockinstall.kernels import kernel_dist
from verl_bootstrap.paths import (
    atomic_write,
    cache_folder,
    kernel_dir,
    locked_requirements_file,
    override_file,
    protected_file,
)
from verl_bootstrap.plan.model import Plan, Step
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.profile.verlextras import (
    marker_env,
    stage_pins,
)
from verl_bootstrap.redact import redact
from verl_bootstrap.steps.base import StepContext, run_cache_first, run_in_env
from verl_bootstrap.steps.protect import check_protected, protected_pins, refused_by_pins
from verl_bootstrap.steps.srcbuild import build_locked_sdists
from verl_bootstrap.steps.stagetext import described
from verl_bootstrap.steps.verldeps import editable_verl, verl_pin, verl_requirement

__all__ = ["describe", "execute", "stage_request"]


def stage_request(plan: Plan, stage: StageSpec) -> InstallRequest:
    """The install a packages/verl-deps stage performs: --locked, the lockfile's hashed
    requirements (nothing resolved); else its packages, under the protected pins."""
    locked = locked_request(plan.prefix, stage, plan.locked_stage(stage.id), offline=plan.offline)
    return locked or _resolving_request(plan, stage)


def _resolving_request(plan: Plan, stage: StageSpec) -> InstallRequest:
    packages = stage.packages
    if stage.kind == "verl-deps" and stage.verl_lines:  # verl's extras, as plain requirements
        packages = (verl_requirement(()), *stage.verl_lines, *packages)
    elif stage.kind == "verl-deps":  # verl is installed editable by now: see steps/verldeps.py
        packages = (verl_requirement(stage.extras), *packages)
    pinned = stage.protect or stage.kind == "verl-deps" or bool(plan.profile.constraints)
    return InstallRequest(
        python=env_python(plan.prefix),
        packages=packages,
        index=stage.index,
        no_deps=stage.no_deps,
        no_build_isolation=stage.no_build_isolation,
        overrides_file=override_file(plan.prefix, stage.id) if _overrides(stage) else None,
        constraints_file=protected_file(plan.prefix, stage.id) if pinned else None,
        offline=plan.offline,
    )


def _profile_constraints(constraints: Sequence[str], pins: Sequence[str]) -> list[str]:
    """The profile's constraints (verl's uv.lock pins, say) on a package no pin above holds:
    a protected package keeps the build an earlier stage installed."""
    held = {canonicalize_name(Requirement(p).name) for p in pins}
    return [c for c in constraints if canonicalize_name(Requirement(c).name) not in held]


def _overrides(stage: StageSpec) -> tuple[str, ...]:
    """The stage's overrides, with those that leave out what a later stage installs."""
    return (*stage.overrides, *stage.exclusion_overrides())


def _at_verl_pins(plan: Plan, stage: StageSpec) -> StageSpec:
    """A stage under verl's contract with verl's pins, its extras' requirements and its overrides,
    read from the checkout (there by now)."""
    if not stage.verl_contract or plan.locked_stage(stage.id):  # a locked stage has its pins
        return stage
    python = sorted(p.name.removeprefix("python") for p in plan.prefix.glob("lib/python3.*"))
    env = marker_env(python[-1] if python else plan.profile.python.prefer, host_platform())
    return stage_pins(stage, plan.source.checkout, env)


def _argv(plan: Plan, stage: StageSpec) -> list[str]:
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


def describe(plan: Plan, stage: StageSpec, previous: str) -> Step:
    decision = plan.kernels.get(stage.id)
    env = {**stage.env, **(decision.env if decision else {})}
    description, said = described(plan, stage, env)
    return Step(
        id=stage.id,
        kind="script" if stage.kind == "script" else "stage",
        deps=(previous,),
        description=description,
        env=env,
        env_said=said,
        commands=(tuple(redact(a) for a in _argv(plan, stage)),),
        inputs={
            "env": dict(stage.env),
            "overrides": stage.overrides,
            "expect": dict(stage.expect),
            "protect": stage.protect,
            **_extras_inputs(stage),
            **_locked_inputs(plan, stage.id),
        },
    )


def _extras_inputs(stage: StageSpec) -> dict[str, Any]:
    """A stage that takes verl's extras re-runs when they, or what it leaves out, change."""
    if not stage.verl_extras:
        return {}
    subs = [f"{s.replace}->{s.by}" for s in stage.substitutions]
    return {"verl_extras": stage.verl_extras, "excluded": stage.excluded, "substitutions": subs}


def _locked_inputs(plan: Plan, stage_id: str) -> dict[str, str]:
    """A locked stage re-runs when its part of the lockfile changes."""
    stage = plan.locked_stage(stage_id)
    if stage is None:
        return {}
    inputs = {"locked": locked_requirements(stage)}
    if stage.build:  # a changed build env re-runs the stage (older records stay as they were)
        inputs["build"] = " ".join(
            f"{d.name}=={d.version}:{','.join(d.hashes)}" for d in stage.build
        )
    return inputs


def execute(ctx: StepContext) -> dict[str, Any]:
    stage = _at_verl_pins(ctx.plan, next(s for s in ctx.plan.stages if s.id == ctx.step.id))
    if _overrides(stage):
        atomic_write(override_file(ctx.plan.prefix, stage.id), "\n".join(_overrides(stage)) + "\n")
    locked = ctx.step.locked  # --locked: the lockfile's stage, attached when the plan compiled
    if locked and stage.kind != "script" and stage.kernel is not None:
        built, kernel = _install_locked_kernel(ctx, stage, locked)
    else:
        built, kernel = _locked_stage_requirements(ctx, stage, locked) if locked else ({}, {})
        if stage.kind == "script":
            checkout = ctx.plan.source.checkout
            run_in_env(ctx, _argv(ctx.plan, stage), env=dict(stage.env), cwd=checkout)
        else:
            kernel = _install_stage(ctx, stage) or kernel
    now = installed(ctx.plan.prefix)
    if stage.kind == "verl-deps":  # verl is still its checkout (steps/verldeps.py)
        editable_verl(now, ctx.plan.prefix, ctx.plan.source.checkout)
    _check_expect(stage.id, stage.expect, now)
    ctx.protected.update(check_protected(ctx.protected, now, stage=stage.id, names=stage.protect))
    return {
        "installed": {n: d.version for n, d in sorted(now.items())},
        "built": {n: wheel.sha256 for n, wheel in sorted(built.items())},
        **kernel,
    }


def _install_locked_kernel(
    ctx: StepContext, stage: StageSpec, locked: LockedStage
) -> tuple[dict[str, Artifact], dict[str, Any]]:
    """A locked kernel stage: installed with the first wheel its sources offer whose modules
    load (a prebuilt wheel that does not is uninstalled and the stage installed again with the
    next one), at last from the locked sdist built here (kernels/stage, the one kernel flow)."""
    assert stage.kernel is not None
    write_build_constraints(ctx.plan.prefix, locked)

    def install(wheels: dict[str, Artifact], held: tuple[str, ...]) -> None:
        _write_locked_requirements(ctx, locked, wheels, held)
        _install_stage(ctx, stage)

    route = LockedRoute(
        job=_kernel_job(
            ctx, stage, env_python(ctx.plan.prefix), lambda argv: run_in_env(ctx, argv)
        ),
        stage=locked,
        dist=kernel_dist(locked, stage.kernel),
        artifacts=ctx.plan.locked_artifacts,
        build=lambda given: _build_locked_sdists(ctx, stage, locked, given),
        install_stage=install,
        online=not ctx.plan.options.offline,
        bundled=open_bundled(bundle) if (bundle := ctx.plan.bundle_kernels) else None,
    )
    built, kernel = run_locked_kernel(route)
    return built, {"kernel": kernel} if kernel else {}


def _locked_stage_requirements(
    ctx: StepContext, stage: StageSpec, locked: LockedStage
) -> tuple[dict[str, Artifact], dict[str, Any]]:
    """A locked stage's hashed requirements, its sdists built into wheels first; the wheels (a
    stage's kernel is taken by `_install_locked_kernel`)."""
    write_build_constraints(ctx.plan.prefix, locked)
    built: dict[str, Artifact] = {}
    if stage.kind != "script":
        built = _build_locked_sdists(ctx, stage, locked, ctx.plan.locked_artifacts)
    _write_locked_requirements(ctx, locked, built)
    return built, {}


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


def _kernel_job(
    ctx: StepContext, stage: StageSpec, python: Path, run: Callable[[list[str]], None]
) -> KernelJob:
    """What the kernel stage's flow needs from the step, on either route."""
    assert stage.kernel is not None
    return KernelJob(
        kernel=stage.kernel,
        python=python,
        installer=ctx.plan.installer,
        run=run,
        note=lambda line: _note(ctx, line),
        wheelhouse=open_wheelhouse(ctx.plan.wheelhouse, os.environ),
        work=kernel_dir(ctx.plan.prefix, stage.id),
        gpu_present=ctx.plan.driver is not None,
        record=record_for_profile(ctx.plan.profile_ref),
        order=ctx.plan.kernel_sources,
        stage=stage.id,
    )


def _build_locked_sdists(
    ctx: StepContext, stage: StageSpec, locked: LockedStage, artifacts: Mapping[str, Artifact]
) -> dict[str, Artifact]:
    """The stage's locked sdists, built here into wheels that the stage then installs."""
    watched, env = _watched(ctx, stage), dict(ctx.step.env or stage.env)  # a kernel's sizing too
    return build_locked_sdists(
        locked,
        artifacts,
        prefix=ctx.plan.prefix,
        request=stage_request(ctx.plan, stage),
        settings=ctx.plan.settings,
        cache=cache_folder(),
        run=lambda argv: run_in_env(watched, argv, env=env),
        log=lambda line: _log(ctx, line),
    )


def _watched(ctx: StepContext, stage: StageSpec) -> StepContext:
    """A kernel stage's context whose output lines also count compiled units (live progress)."""
    if stage.kernel is None:
        return ctx
    progress = BuildProgress(stage.id, stage.kernel.distribution)
    return replace(ctx, on_line=chain(ctx.on_line, progress))


def _install_stage(ctx: StepContext, stage: StageSpec) -> dict[str, Any]:
    """The stage's install; a kernel stage's outputs say which source its wheel came from."""
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
        run_cache_first(ctx, _cached_argv(ctx, stage), _argv(ctx.plan, stage), env=env)
    except CommandFailed as failed:
        refused = refused_by_pins(ctx.protected, failed.tail, stage=stage.id)
        if refused is None:
            raise
        raise refused from failed
    return {}


def _resolving_route(
    ctx: StepContext, stage: StageSpec, request: InstallRequest, env: dict[str, str]
) -> ResolvingRoute:
    watched = _watched(ctx, stage)

    def run(argv: list[str]) -> None:
        run_in_env(watched, argv, env=env)

    available_gb = read_resources().available_gb
    return ResolvingRoute(
        job=_kernel_job(ctx, stage, request.python, run),
        packages=stage.packages,
        build=WheelBuild(request, ctx.plan.settings, env, run, available_gb),
    )


def _log(ctx: StepContext, line: str) -> None:
    """A line in the step's log alone."""
    with ctx.log_path.open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def _note(ctx: StepContext, line: str) -> None:
    """A line in the step's log and on the terminal."""
    with ctx.log_path.open("a", encoding="utf-8") as log:
        log.write(line + "\n")
    emit(line, kind=("note",), step=ctx.step.id)


def _check_expect(stage_id: str, expect: Mapping[str, str], now: Mapping[str, Any]) -> None:
    """The versions a stage promises, checked after it: this catches scripts that fail silently."""
    problems = []
    for name, spec in expect.items():
        dist = now.get(canonicalize_name(name))
        if dist is None:
            problems.append(f"{name} is not installed (expected {spec})")
        elif dist.version not in SpecifierSet(spec, prereleases=True):
            problems.append(f"{name} is {dist.version}, expected {spec}")
    if problems:
        raise StepFailed(
            f"stage {stage_id!r} finished but did not install what it promised: "
            + "; ".join(problems),
            hint="read the step's log: a command in it failed without stopping it",
        )
