"""Step `install-verl`: verl from its checkout, editable, no dependencies, first of all."""

from __future__ import annotations

from verl_bootstrap.installer.cmdline import InstallRequest, install_command
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.lock.installing.lockedsteps import (
    build_constraints_file,
    write_build_constraints,
)
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import NoOutputs
from verl_bootstrap.redact import redact
from verl_bootstrap.run.steps.fetch_source import locked_sdist
from verl_bootstrap.run.steps.stepcontext import StepContext, run_cache_first

__all__ = ["describe", "execute"]


def _argv(plan: Plan, *, offline: bool = False) -> list[str]:
    request = InstallRequest(
        python=env_python(plan.prefix),
        editable=str(plan.source.checkout),
        no_deps=True,
        offline=plan.offline or offline,
        build_constraints=build_constraints_file(plan.prefix, plan.locked_stage("install-verl")),
    )
    return install_command(plan.installer, request, plan.settings)


def _cached_argv(plan: Plan) -> list[str] | None:
    """The locked build env from uv's cache alone (its build dependencies are hash-pinned)."""
    locked = plan.locked_stage("install-verl")
    if plan.installer != "uv" or plan.offline or locked is None or not locked.build:
        return None
    return _argv(plan, offline=True)


def describe(plan: Plan) -> Step:
    return Step(
        id="install-verl",
        kind="install-verl",
        deps=("create-env", "fetch-source"),
        description=(
            "install verl from its release sdist, unpacked by fetch-source, editable, with no "
            "dependencies"
            if locked_sdist(plan)
            else "install verl from its checkout, editable, with no dependencies"
        ),
        commands=(tuple(redact(a) for a in _argv(plan)),),
    )


def execute(ctx: StepContext) -> NoOutputs:
    write_build_constraints(ctx.plan.prefix, ctx.step.locked)  # the lock's build backend
    # The editable build calls three setuptools hooks, each a new Python in uv's throwaway build
    # env: with PYTHONDONTWRITEBYTECODE the second and third compile setuptools again (0.6 s of
    # 2.2 s here). The pycs land in that build env only, never in the user's env or checkout.
    env: dict[str, str | None] = {"PYTHONDONTWRITEBYTECODE": None}
    run_cache_first(ctx, _cached_argv(ctx.plan), _argv(ctx.plan), env=env)
    return NoOutputs()
