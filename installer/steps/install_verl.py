"""Step `install-verl`: verl from its checkout, editable, no dependencies, first of all."""

from __future__ import annotations

from typing import Any

from installer.envs.base import env_python
from installer.installers import InstallRequest, install_command
from installer.plan.model import Plan, Step
from installer.redact import redact
from installer.steps.base import StepContext, run_in_env

__all__ = ["describe", "execute"]


def _argv(plan: Plan) -> list[str]:
    request = InstallRequest(
        python=env_python(plan.prefix),
        editable=str(plan.source.checkout),
        no_deps=True,
        offline=plan.options.offline,
    )
    return install_command(plan.options.installer, request, plan.settings)


def describe(plan: Plan) -> Step:
    return Step(
        id="install-verl",
        kind="install-verl",
        deps=("create-env", "fetch-source"),
        description="install verl from its checkout, editable, with no dependencies",
        commands=(tuple(redact(a) for a in _argv(plan)),),
    )


def execute(ctx: StepContext) -> dict[str, Any]:
    run_in_env(ctx, _argv(ctx.plan))
    return {}
