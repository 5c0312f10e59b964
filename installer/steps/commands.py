"""Build the plan's steps: ids, dependencies, and the exact commands each one runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from installer.envs.base import EnvRequest, env_python
from installer.envs.registry import get_backend
from installer.installers import InstallRequest, install_command
from installer.paths import env_lockfile, override_file, protected_file
from installer.plan.locked import locked_requirements, locked_requirements_path
from installer.profile.stagespec import StageSpec
from installer.redact import redact

if TYPE_CHECKING:
    from installer.plan.compile import Plan, Step

__all__ = ["env_request", "stage_request", "step_commands"]


def env_request(plan: Plan, log_path: Path | None = None) -> EnvRequest:
    """What the env backend is asked for."""
    needs_pip = plan.options.installer == "pip" or any(s.kind == "script" for s in plan.stages)
    return EnvRequest(
        prefix=plan.prefix,
        python_requires=plan.profile.python.requires,
        python_prefer=plan.profile.python.prefer,
        interpreter=plan.interpreter,
        channels=plan.options.channels or plan.profile.env.channels,
        conda_packages=(*plan.profile.env.conda_packages, *_locked_conda(plan)),
        seed_pip=needs_pip,
        log_path=log_path,
    )


def _locked_conda(plan: Plan) -> tuple[str, ...]:
    """A --locked conda env gets the locked conda packages, each pinned to version and build."""
    if plan.locked is None or plan.backend != "conda":
        return ()
    return tuple(f"{p.name} =={p.version} {p.build}" for p in plan.locked.lock.conda)


def stage_request(plan: Plan, stage: StageSpec) -> InstallRequest:
    """The install a packages/verl-deps stage performs."""
    if plan.locked is not None:  # the lockfile's hashed requirements, nothing resolved
        return InstallRequest(
            python=env_python(plan.prefix),
            requirements=locked_requirements_path(plan.prefix, stage.id),
            index=stage.index,
            no_deps=True,
            no_build_isolation=stage.no_build_isolation,
            offline=plan.options.offline,
        )
    editable = None
    if stage.kind == "verl-deps":
        extras = f"[{','.join(stage.extras)}]" if stage.extras else ""
        editable = f"{plan.source.checkout}{extras}"
    return InstallRequest(
        python=env_python(plan.prefix),
        packages=stage.packages,
        editable=editable,
        index=stage.index,
        no_deps=stage.no_deps,
        no_build_isolation=stage.no_build_isolation,
        overrides_file=override_file(plan.prefix, stage.id) if stage.overrides else None,
        constraints_file=protected_file(plan.prefix, stage.id) if stage.protect else None,
        offline=plan.options.offline,
    )


def step_commands(plan: Plan) -> list[Step]:
    """The steps in profile order; `compile_plan` sorts them topologically."""
    from installer.plan.compile import Step  # noqa: PLC0415

    steps = [
        _create_env(plan, Step),
        _fetch_source(plan, Step),
        _install_verl(plan, Step),
    ]
    previous = "install-verl"
    for stage in plan.stages:
        steps.append(_stage(plan, stage, previous, Step))
        previous = stage.id
    steps.append(
        Step(
            id="record-lock",
            kind="record-lock",
            deps=(previous,),
            description="record what was installed into the env's lockfile",
            commands=((f"write {env_lockfile(plan.prefix)}",),),
            inputs={"variant": plan.variant, "profile": plan.profile.name},
        )
    )
    steps.append(
        Step(
            id="verify",
            kind="verify",
            deps=("record-lock",),
            description="imports, versions, `uv pip check`, and the GPU smoke test",
            commands=((str(env_python(plan.prefix)), "<verify probe>"),),
            inputs={"verify": plan.profile.verify.model_dump(mode="json")},
        )
    )
    return steps


def _create_env(plan: Plan, step: type[Step]) -> Step:
    request = env_request(plan)
    backend = get_backend(plan.backend, conda_exe=plan.options.conda_exe)
    return step(
        id="create-env",
        kind="create-env",
        deps=(),
        description=f"create the {plan.backend} env at {plan.prefix}",
        commands=(tuple(redact(a) for a in backend.describe(request)),),
        inputs={"backend": plan.backend, "python": plan.profile.python.requires},
    )


def _fetch_source(plan: Plan, step: type[Step]) -> Step:
    src = plan.source
    command = (
        "git",
        "clone",
        "--depth",
        "1",
        "--branch",
        src.ref,
        redact(src.repo),
        str(src.checkout),
    )
    fallback = (
        f"if unreachable: verl=={src.release} sdist from the index" if src.sdist_fallback else ""
    )
    return step(
        id="fetch-source",
        kind="fetch-source",
        deps=(),
        description=f"get verl {src.ref} from {redact(src.repo)}"
        + (f" ({fallback})" if fallback else ""),
        commands=(command,),
        inputs={"repo": src.repo, "ref": src.ref, "fallback": src.sdist_fallback},
    )


def _install_verl(plan: Plan, step: type[Step]) -> Step:
    request = InstallRequest(
        python=env_python(plan.prefix),
        editable=str(plan.source.checkout),
        no_deps=True,
        offline=plan.options.offline,
    )
    command = install_command(plan.options.installer, request, plan.settings)
    return step(
        id="install-verl",
        kind="install-verl",
        deps=("create-env", "fetch-source"),
        description="install verl from its checkout, editable, with no dependencies",
        commands=(tuple(redact(a) for a in command),),
    )


def _stage(plan: Plan, stage: StageSpec, previous: str, step: type[Step]) -> Step:
    if stage.kind == "script":
        script = plan.source.checkout / (stage.script or "")
        command: list[str] = ["bash", "-eE", "-o", "pipefail", str(script)]
    else:
        command = install_command(plan.options.installer, stage_request(plan, stage), plan.settings)
    return step(
        id=stage.id,
        kind="script" if stage.kind == "script" else "stage",
        deps=(previous,),
        description=stage.description or f"install {', '.join(stage.packages)}",
        commands=(tuple(redact(a) for a in command),),
        inputs={
            "env": dict(stage.env),
            "overrides": stage.overrides,
            "expect": dict(stage.expect),
            "protect": stage.protect,
            **_locked_inputs(plan, stage.id),
        },
    )


def _locked_inputs(plan: Plan, stage_id: str) -> dict[str, str]:
    """A locked stage re-runs when its part of the lockfile changes."""
    if plan.locked is None:
        return {}
    stage = next(s for s in plan.locked.lock.stages if s.id == stage_id)
    return {"locked": locked_requirements(stage)}
