"""How each kind of step runs. Every executor returns the outputs later steps (and resumes) need."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from installer import proc
from installer.envs.base import env_python
from installer.envs.inventory import canonical, installed
from installer.envs.registry import get_backend
from installer.errors import CommandFailed, StepFailed
from installer.events import emit
from installer.installers import InstallRequest, install_command
from installer.lockfile.lookup import Artifact
from installer.lockfile.model import LockedStage
from installer.paths import atomic_write, override_file
from installer.plan.compile import Plan, Step
from installer.plan.locked import (
    check_source,
    fetch_locked_sdist,
    locked_requirements,
    locked_requirements_path,
    record_locked_env,
)
from installer.profile.stagespec import StageSpec
from installer.steps.commands import env_request, stage_request
from installer.steps.protect import check_protected, protected_pins, refused_by_pins
from installer.steps.source import SourceResult, fetch_source, pip_launcher

__all__ = ["STEP_KINDS", "StepContext", "activation_env", "execute_step"]


@dataclass
class StepContext:
    """What a step gets: the plan, its log, earlier outputs, and the protected-package record."""

    plan: Plan
    step: Step
    log_path: Path
    prior: Mapping[str, Mapping[str, Any]]
    protected: dict[str, dict[str, str]] = field(default_factory=dict)
    on_line: Callable[[str], None] | None = None


Executor = Callable[[StepContext], dict[str, Any]]


def activation_env(prefix: Path) -> dict[str, str | None]:
    """Variables that make a child see the env first, as an activated shell would."""
    path = f"{prefix / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    is_conda = (prefix / "conda-meta").is_dir()
    return {
        "PATH": path,
        "VIRTUAL_ENV": None if is_conda else str(prefix),
        "CONDA_PREFIX": str(prefix) if is_conda else None,
        "PYTHONNOUSERSITE": "1",  # ~/.local packages must not leak into the env
    }


def _create_env(ctx: StepContext) -> dict[str, Any]:
    backend = get_backend(ctx.plan.backend, conda_exe=ctx.plan.options.conda_exe)
    created = backend.create(env_request(ctx.plan, ctx.log_path))
    return {"created": created}


def _fetch_source(ctx: StepContext) -> dict[str, Any]:
    locked = ctx.plan.locked
    result = None
    if locked is not None:  # the checked sdist, cached by sha256
        result = fetch_locked_sdist(ctx.plan.source, locked, log_path=ctx.log_path)
    if result is None:
        result = fetch_source(
            ctx.plan.source, ctx.plan.settings, pip=pip_launcher(), log_path=ctx.log_path
        )
    if locked is not None:  # verl itself is checked before anything is installed
        check_source(locked.lock, result)
    if result.note:  # e.g. git was unreachable and verl's release sdist stands in: say so
        emit(result.note, kind=("note",), step=ctx.step.id)
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in result.__dict__.items()}


def _install_verl(ctx: StepContext) -> dict[str, Any]:
    _run(ctx, _install_verl_argv(ctx))
    return {}


def _install_verl_argv(ctx: StepContext) -> list[str]:
    request = InstallRequest(
        python=env_python(ctx.plan.prefix),
        editable=str(ctx.plan.source.checkout),
        no_deps=True,
        offline=ctx.plan.options.offline,
    )
    return install_command(ctx.plan.options.installer, request, ctx.plan.settings)


def _stage(ctx: StepContext) -> dict[str, Any]:
    stage = next(s for s in ctx.plan.stages if s.id == ctx.step.id)
    if stage.overrides:
        atomic_write(override_file(ctx.plan.prefix, stage.id), "\n".join(stage.overrides) + "\n")
    built: dict[str, Artifact] = {}
    if ctx.plan.locked is not None:
        locked = next(s for s in ctx.plan.locked.lock.stages if s.id == stage.id)
        if stage.kind != "script":
            built = _build_locked_sdists(ctx, stage, locked, ctx.plan.locked.artifacts)
        atomic_write(
            locked_requirements_path(ctx.plan.prefix, stage.id),
            locked_requirements(locked, ctx.plan.locked.artifacts, built),
        )
    if stage.kind == "script":
        script = ctx.plan.source.checkout / (stage.script or "")
        argv = ["bash", "-eE", "-o", "pipefail", str(script)]
        _run(ctx, argv, env=dict(stage.env), cwd=ctx.plan.source.checkout)
    else:
        _install_stage(ctx, stage)
    now = installed(ctx.plan.prefix)
    _check_expect(stage.id, stage.expect, now)
    ctx.protected.update(check_protected(ctx.protected, now, stage=stage.id, names=stage.protect))
    return {
        "installed": {n: d.version for n, d in sorted(now.items())},
        "built": {n: wheel.sha256 for n, wheel in sorted(built.items())},
    }


def _build_locked_sdists(
    ctx: StepContext, stage: StageSpec, locked: LockedStage, artifacts: Mapping[str, Artifact]
) -> dict[str, Artifact]:
    """The stage's locked sdists, built here into wheels that the stage then installs."""
    from installer.envs.conda import default_cache_root  # noqa: PLC0415
    from installer.steps.srcbuild import build_locked_sdists  # noqa: PLC0415

    return build_locked_sdists(
        locked, artifacts,
        prefix=ctx.plan.prefix, request=stage_request(ctx.plan, stage),
        settings=ctx.plan.settings, cache=default_cache_root(),
        run=lambda argv: _run(ctx, argv, env=dict(stage.env)),
    )  # fmt: skip


def _install_stage(ctx: StepContext, stage: StageSpec) -> None:
    request = stage_request(ctx.plan, stage)
    if request.constraints_file:
        pins = protected_pins(ctx.protected, stage=stage.id)
        atomic_write(request.constraints_file, "".join(f"{pin}\n" for pin in pins))
    argv = install_command(ctx.plan.options.installer, request, ctx.plan.settings)
    try:
        _run(ctx, argv, env=dict(stage.env))
    except CommandFailed as failed:
        refused = refused_by_pins(ctx.protected, failed.tail, stage=stage.id)
        if refused is None:
            raise
        raise refused from failed


def _check_expect(stage_id: str, expect: Mapping[str, str], now: Mapping[str, Any]) -> None:
    """The versions a stage promises, checked after it: this catches scripts that fail silently."""
    problems = []
    for name, spec in expect.items():
        dist = now.get(canonical(name))
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


def _record_lock(ctx: StepContext) -> dict[str, Any]:
    from installer.steps.record_lock import write_env_lock  # noqa: PLC0415

    if ctx.plan.locked is not None:  # the env's record is the lockfile it was installed from
        built = {
            name: digest
            for outputs in ctx.prior.values()
            for name, digest in dict(outputs.get("built") or {}).items()
        }
        path = record_locked_env(ctx.plan.prefix, ctx.plan.locked.lock, built)
        return {"lockfile": str(path)}
    source = SourceResult(
        **{**ctx.prior["fetch-source"], "path": Path(ctx.prior["fetch-source"]["path"])}
    )
    path = write_env_lock(ctx.plan, source, snapshots=ctx.prior)
    return {"lockfile": str(path)}


def _verify(ctx: StepContext) -> dict[str, Any]:
    from installer.steps.verify import verify_env  # noqa: PLC0415

    report = verify_env(
        ctx.plan.prefix,
        ctx.plan.profile.verify,
        log_path=ctx.log_path,
        require_gpu=ctx.plan.options.require_gpu,
        gpu_present=ctx.plan.driver is not None,
    )
    if not report.ok:
        raise StepFailed("verification failed: " + "; ".join(report.failures()))
    return {"verify": report.to_json()}


def _run(
    ctx: StepContext,
    argv: list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> None:
    child = {**activation_env(ctx.plan.prefix), **(env or {})}
    proc.run(argv, log_path=ctx.log_path, env=child, cwd=cwd, on_line=ctx.on_line)


STEP_KINDS: dict[str, Executor] = {
    "create-env": _create_env,
    "fetch-source": _fetch_source,
    "install-verl": _install_verl,
    "stage": _stage,
    "script": _stage,
    "record-lock": _record_lock,
    "verify": _verify,
}


def execute_step(ctx: StepContext) -> dict[str, Any]:
    """Run one step by its kind."""
    return STEP_KINDS[ctx.step.kind](ctx)
