"""verify: prove an env works — imports, versions, `uv pip check`, the GPU smoke test, and where
the rule of verify/trainplan.py says so, one real training step (`install --train`)."""

from __future__ import annotations

from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from verl_bootstrap.errors import BootstrapError, StepFailed
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.lock.io import recorded_forced
from verl_bootstrap.paths import state_file
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import VerifyInputs, VerifyOutputs
from verl_bootstrap.run.state.state import State
from verl_bootstrap.run.steps.stepcontext import StepContext
from verl_bootstrap.verify.env import verify_env
from verl_bootstrap.verify.train import record_entry, train_step
from verl_bootstrap.verify.trainplan import (
    TrainDecision,
    install_cost,
    planned_level,
    within_budget,
)

__all__ = ["describe", "execute"]


def describe(plan: Plan) -> Step:
    """Step `verify`: the checks above, in the env's own interpreter, after the lockfile."""
    train = _train(plan)
    inputs = VerifyInputs(
        verify=plan.profile.verify.model_dump(mode="json"),
        # only with a training step: an env verified without one keeps its step's fingerprint
        train=train.level or None,
    )
    return Step(
        id="verify",
        kind="verify",
        deps=("record-lock",),
        description=_what(plan) + _train_text(plan, train),
        commands=((str(env_python(plan.prefix)), "<verify probe>"),),
        inputs=inputs,
    )


def _train(plan: Plan) -> TrainDecision:
    return planned_level(
        plan.options.train,
        gpu_profile=plan.profile.gpu,
        variant=plan.variant,
        gpu_host=plan.driver is not None,
    )


def _train_text(plan: Plan, train: TrainDecision) -> str:
    if train.level:
        return f"; then one {train.level.upper()} training step ({train.reason})"
    if plan.profile.gpu or plan.options.train != "auto":  # a cpu profile's plan reads as before
        return f"; no training step ({train.reason})"
    return ""


def _what(plan: Plan) -> str:
    if plan.variant == "cpu" or not plan.profile.verify.gpu_smoke:
        return "imports, versions and `uv pip check` (a CPU env: no GPU smoke test)"
    return "imports, versions, `uv pip check`, and the GPU smoke test"


def execute(ctx: StepContext) -> VerifyOutputs:
    report = verify_env(
        ctx.plan.prefix,
        ctx.plan.profile.verify,
        log_path=ctx.log_path,
        require_gpu=ctx.plan.require_gpu,
        gpu_present=ctx.plan.driver is not None,
        no_deps=_no_deps(ctx.plan),
        forced=recorded_forced(ctx.plan.prefix),
    )
    if not report.ok:
        raise StepFailed("verification failed: " + "; ".join(report.failures()))
    return VerifyOutputs(verify=report.to_json(), train=_train_outputs(ctx))


def _train_outputs(ctx: StepContext) -> dict[str, Any] | None:
    """The training step the plan chose, run, its result kept in the step's outputs."""
    train = _train(ctx.plan)
    if not train.level:
        return None
    if train.auto:
        keep, why = within_budget(*_recorded_costs(ctx.plan))
        if not keep:
            return {"level": train.level, "skipped": why}
    report = train_step(ctx.plan.prefix, train.level, log_path=ctx.log_path)
    if not report.ok:
        raise StepFailed(
            f"the training step ({train.level}) failed: " + "; ".join(report.failures()),
            hint=f"its log is {ctx.log_path}; `--train none` installs without it",
        )
    return {"level": train.level, **record_entry(report)}


def _recorded_costs(plan: Plan) -> tuple[float | None, float | None]:
    """The env's recorded RL step (its last one) and install times, where it has them."""
    try:
        state = State.load(state_file(plan.prefix))
    except (BootstrapError, OSError):
        return None, None
    steps = {name: record.model_dump() for name, record in state.steps.items()}
    last = state.steps.get("verify")
    ran = (last.outputs.get("train") or {}) if last else {}
    seconds = ran.get("seconds") if ran.get("level") == "rl" else None
    if seconds is None:
        seconds = (state.train.get("rl") or {}).get("seconds")
    return (float(seconds) if seconds is not None else None), install_cost(steps)


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
