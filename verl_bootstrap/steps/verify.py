"""verify: prove an env works — imports, versions, `uv pip check`, and the GPU smoke test."""

from __future__ import annotations

from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from verl_bootstrap.envs.base import env_python
from verl_bootstrap.errors import StepFailed
from verl_bootstrap.plan.model import Plan, Step
from verl_bootstrap.steps.base import StepContext
from verl_bootstrap.verify.env import verify_env

__all__ = ["describe", "execute"]


def describe(plan: Plan) -> Step:
    """Step `verify`: the checks above, in the env's own interpreter, after the lockfile."""
    return Step(
        id="verify",
        kind="verify",
        deps=("record-lock",),
        description=_what(plan),
        commands=((str(env_python(plan.prefix)), "<verify probe>"),),
        inputs={"verify": plan.profile.verify.model_dump(mode="json")},
    )


def _what(plan: Plan) -> str:
    if plan.variant == "cpu" or not plan.profile.verify.gpu_smoke:
        return "imports, versions and `uv pip check` (a CPU env: no GPU smoke test)"
    return "imports, versions, `uv pip check`, and the GPU smoke test"


def execute(ctx: StepContext) -> dict[str, Any]:
    report = verify_env(
        ctx.plan.prefix,
        ctx.plan.profile.verify,
        log_path=ctx.log_path,
        require_gpu=ctx.plan.require_gpu,
        gpu_present=ctx.plan.driver is not None,
        no_deps=_no_deps(ctx.plan),
    )
    if not report.ok:
        raise StepFailed("verification failed: " + "; ".join(report.failures()))
    return {"verify": report.to_json()}


def _no_deps(plan: Plan) -> tuple[tuple[str, str], ...]:
    """(stage id, package name) of each package a stage installs without its dependencies."""
    return tuple(
        (stage.id, Requirement(spec).name)
        for stage in plan.profile.stages
        if stage.no_deps
        for spec in stage.packages
        if _is_requirement(spec)
    )


def _is_requirement(spec: str) -> bool:
    try:
        Requirement(spec)
    except InvalidRequirement:  # a path or URL: its name is not known here
        return False
    return True
