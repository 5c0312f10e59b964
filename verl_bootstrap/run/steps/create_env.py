"""Step `create-env`: make (or reuse) the env through its backend."""

from __future__ import annotations

from pathlib import Path

from verl_bootstrap.installer.envs.base import EnvRequest
from verl_bootstrap.installer.envs.condahash import LockedConda
from verl_bootstrap.installer.envs.envbackends import get_backend
from verl_bootstrap.lock.installing.lockedsteps import locked_conda
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import CreateEnvInputs, CreateEnvOutputs
from verl_bootstrap.redact import redact
from verl_bootstrap.run.steps.stepcontext import StepContext

__all__ = ["describe", "env_request", "execute"]


def env_request(plan: Plan, log_path: Path | None = None) -> EnvRequest:
    """What the env backend is asked for."""
    needs_pip = plan.installer == "pip" or any(s.kind == "script" for s in plan.stages)
    return EnvRequest(
        prefix=plan.prefix,
        python_requires=plan.profile.python.requires,
        python_prefer=plan.profile.python.prefer,
        interpreter=plan.interpreter,
        channels=plan.channels,
        conda_packages=(*plan.profile.env.conda_packages, *_locked_conda(plan)),
        seed_pip=needs_pip,
        log_path=log_path,
        locked_conda=_locked_digests(plan),
    )


def _locked_conda(plan: Plan) -> tuple[str, ...]:
    """A --locked conda env gets the locked conda packages, each pinned to version and build."""
    packages = locked_conda(plan.lockfile, plan.backend) or ()
    return tuple(f"{p.name} =={p.version} {p.build}" for p in packages)


def _locked_digests(plan: Plan) -> tuple[LockedConda, ...] | None:
    """A --locked conda env links only packages with the lock's digests (None: any)."""
    packages = locked_conda(plan.lockfile, plan.backend)
    if packages is None:
        return None
    return tuple(LockedConda(name=p.name, sha256=p.sha256, md5=p.md5) for p in packages)


def describe(plan: Plan) -> Step:
    backend = get_backend(plan.backend, conda_exe=plan.conda_exe)
    return Step(
        id="create-env",
        kind="create-env",
        deps=(),
        description=f"create the {plan.backend} env at {plan.prefix}",
        commands=(tuple(redact(a) for a in backend.describe(env_request(plan))),),
        inputs=CreateEnvInputs(backend=plan.backend, python=plan.profile.python.requires),
    )


def execute(ctx: StepContext) -> CreateEnvOutputs:
    backend = get_backend(ctx.plan.backend, conda_exe=ctx.plan.conda_exe)
    created = backend.create(env_request(ctx.plan, ctx.log_path))
    return CreateEnvOutputs(created=created)
