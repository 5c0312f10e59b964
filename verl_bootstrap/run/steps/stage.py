"""Steps `stage` and `script`: one accelerator stage of the profile (or of the lockfile).

A `stage` installs packages with uv or pip, under the protected-package pins of earlier stages;
a `script` runs a script from verl's checkout. Both are checked afterwards against what they
promise (`expect`) and against the protected packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.lock.installing.lockedsteps import locked_requirements
from verl_bootstrap.paths import atomic_write, override_file
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import StageInputs, StageOutputs
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.profile.verlextras import marker_env, stage_pins
from verl_bootstrap.redact import redact
from verl_bootstrap.run.steps.protect import check_protected
from verl_bootstrap.run.steps.stagecommand import install_stage, overrides, stage_argv
from verl_bootstrap.run.steps.stagelocked import install_locked_kernel, locked_stage_requirements
from verl_bootstrap.run.steps.stagetext import described
from verl_bootstrap.run.steps.stepcontext import StepContext, run_in_env
from verl_bootstrap.run.steps.verldeps import editable_verl

__all__ = ["describe", "execute"]


def _at_verl_pins(plan: Plan, stage: StageSpec) -> StageSpec:
    """A stage under verl's contract with verl's pins, its extras' requirements and its overrides,
    read from the checkout (there by now)."""
    if not stage.verl_contract or plan.locked_stage(stage.id):  # a locked stage has its pins
        return stage
    python = sorted(p.name.removeprefix("python") for p in plan.prefix.glob("lib/python3.*"))
    env = marker_env(python[-1] if python else plan.profile.python.prefer, host_platform())
    return stage_pins(stage, plan.source.checkout, env)


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
        commands=(tuple(redact(a) for a in stage_argv(plan, stage)),),
        inputs=_inputs(plan, stage),
    )


def _inputs(plan: Plan, stage: StageSpec) -> StageInputs:
    inputs = StageInputs(
        env=dict(stage.env),
        overrides=stage.overrides,
        expect=dict(stage.expect),
        protect=stage.protect,
    )
    if stage.verl_extras:  # re-runs when verl's extras, or what the stage leaves out, change
        subs = tuple(f"{s.replace}->{s.by}" for s in stage.substitutions)
        inputs = replace(
            inputs, verl_extras=stage.verl_extras, excluded=stage.excluded, substitutions=subs
        )
    locked = plan.locked_stage(stage.id)
    if locked is None:
        return inputs
    # a locked stage re-runs when its part of the lockfile changes, its build env included
    # (a lock with no build env leaves it out: older records stay as they were)
    build = " ".join(f"{d.name}=={d.version}:{','.join(d.hashes)}" for d in locked.build)
    return replace(inputs, locked=locked_requirements(locked), build=build or None)


def execute(ctx: StepContext) -> StageOutputs:
    stage = _at_verl_pins(ctx.plan, next(s for s in ctx.plan.stages if s.id == ctx.step.id))
    if overrides(stage):
        atomic_write(override_file(ctx.plan.prefix, stage.id), "\n".join(overrides(stage)) + "\n")
    locked = ctx.step.locked  # --locked: the lockfile's stage, attached when the plan compiled
    kernel: Mapping[str, Any] | None = None  # a kernel stage: the wheel it took
    if locked and stage.kind != "script" and stage.kernel is not None:
        built, kernel = install_locked_kernel(ctx, stage, locked)
    else:
        built = locked_stage_requirements(ctx, stage, locked) if locked else {}
        if stage.kind == "script":
            checkout = ctx.plan.source.checkout
            run_in_env(ctx, stage_argv(ctx.plan, stage), env=dict(stage.env), cwd=checkout)
        else:
            kernel = install_stage(ctx, stage)
    now = installed(ctx.plan.prefix)
    if stage.kind == "verl-deps":  # verl is still its checkout (run/steps/verldeps.py)
        editable_verl(now, ctx.plan.prefix, ctx.plan.source.checkout)
    _check_expect(stage.id, stage.expect, now)
    ctx.protected.update(check_protected(ctx.protected, now, stage=stage.id, names=stage.protect))
    return StageOutputs(
        installed={n: d.version for n, d in sorted(now.items())},
        built={n: wheel.sha256 for n, wheel in sorted(built.items())},
        kernel=kernel,
    )


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
