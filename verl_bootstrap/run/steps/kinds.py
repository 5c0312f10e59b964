"""The registry of step kinds: the plan's steps in order, and running one step by its kind.

Each kind lives in its own module with `describe` (the step the plan shows and fingerprints)
and `execute` (what runs); both use the same command builder, so what `plan` shows is what runs.
"""

from __future__ import annotations

from typing import Any

from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import SourceOutputs, StepOutputs
from verl_bootstrap.run.steps import (
    create_env,
    fetch_source,
    install_verl,
    record_lock,
    stage,
    verify,
)
from verl_bootstrap.run.steps.stepcontext import Executor, StepContext

__all__ = ["STEP_KINDS", "execute_step", "plan_steps", "running_label"]

STEP_KINDS: dict[str, Executor] = {
    "create-env": create_env.execute,
    "fetch-source": fetch_source.execute,
    "install-verl": install_verl.execute,
    "stage": stage.execute,
    "script": stage.execute,
    "record-lock": record_lock.execute,
    "verify": verify.execute,
}


def plan_steps(plan: Plan) -> list[Step]:
    """The steps in profile order; `compile_plan` sorts them topologically."""
    steps = [create_env.describe(plan), fetch_source.describe(plan), install_verl.describe(plan)]
    previous = "install-verl"
    for spec in plan.stages:
        steps.append(stage.describe(plan, spec, previous))
        previous = spec.id
    steps.append(record_lock.describe(plan, previous))
    steps.append(verify.describe(plan))
    return steps


def running_label(step: Step, prior: dict[str, dict[str, Any]]) -> str:
    """What the step does, as the run shows it when it starts: the plan's description, told
    where a step already run decided it (verl from its release sdist rather than git)."""
    fetched = SourceOutputs.read(prior.get("fetch-source"))
    if step.kind == "install-verl" and fetched.kind == "sdist":
        return "install verl from its release sdist, editable, with no dependencies"
    return step.description


def execute_step(ctx: StepContext) -> StepOutputs:
    """Run one step by its kind."""
    return STEP_KINDS[ctx.step.kind](ctx)
