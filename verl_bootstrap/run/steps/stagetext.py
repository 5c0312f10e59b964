"""What the plan says of a stage, each fact once: verl's extras (each substitution named by the
first stage that takes it), or the lockfile's distributions and what a kernel's wheel holds; the
kernel's source and its build (how long here, the toolkit, where the wheel goes); what verl's
script compiles; and the variables the lockfile sets (by name those the host's sizing replaces).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from verl_bootstrap.kernels.sources import KernelChoice
from verl_bootstrap.kernels.toolkit import toolkit_need
from verl_bootstrap.lock.format import LockedStage
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.profile.variants import variant_window
from verl_bootstrap.profile.verlextras import extras_lines, shown_substitutions

__all__ = ["described"]


def _kernel_wheel_line(count: int, choice: KernelChoice) -> str:
    """What a locked stage installs whose kernel wheel the lockfile does not pin (a hash gap the
    plan names above), or whose whole kernel wheel holds some of its locked parts (left out)."""
    held = choice.replaces
    installs = f"{count - len(held)} of its {count}" if held else str(count)
    whole = choice.distribution or "kernel"
    which = f"whole {whole} wheel" if held else "wheel"
    line = f"{installs} locked distribution(s), hash-checked"
    if choice.unpinned:
        line += f" but for the kernel's {which} (a hash gap, above)"
    else:
        line += f", the kernel's {which} among them"
    if held:
        line += f", installed in place of the locked {whole}, with {', '.join(held)} left out"
    return line + (": it holds them" if held else "")


def _said_before(plan: Plan, stage: StageSpec) -> frozenset[str]:
    """The substitutions the stages before `stage` name (the plan names each once)."""
    before = plan.stages[: plan.stages.index(stage)]
    return frozenset(s.replace for spec in before for s in shown_substitutions(spec))


def _lock_env(locked: LockedStage) -> dict[str, str]:
    """The variables a locked stage's lockfile sets on its install and builds, shown in the plan
    and the run (a lab's lockfile may set known build variables only: safety/buildvars.py)."""
    return {**locked.env, **{k: v for d in locked.distributions for k, v in d.build_env.items()}}


def _lock_env_line(locked: LockedStage, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """What the lockfile sets, each variable once: those the step runs with as set, with their
    values, and by name those the host's sizing replaces (the env line gives their value); and
    the names said with their values."""
    sets = _lock_env(locked)
    kept = {k: v for k, v in sorted(sets.items()) if env.get(k) == v}
    replaced = sorted(k for k in sets if k not in kept)
    said = " ".join(f"{k}={shlex.quote(v)}" for k, v in kept.items())
    if replaced:
        names = ", ".join(replaced)
        said += f"{', and ' if said else ''}{names}, which this host's sizing replaces (below)"
    return (f"the lockfile sets: {said}" if said else ""), tuple(kept)


def described(plan: Plan, stage: StageSpec, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """The stage's description, each fact once (verl's extras or its locked distributions, the
    kernel's source and build, what the lockfile sets), and the variables it states."""
    decision = plan.kernels.get(stage.id)
    description = stage.description or f"install {', '.join(stage.packages)}"
    locked = plan.locked_stage(stage.id)
    if not locked:  # verl's extras, as resolved (a lockfile has its own)
        lines = extras_lines(stage, plan.source.checkout, said=_said_before(plan, stage))
        description += "".join(f"\n{line}" for line in lines)
    elif decision is not None and (decision.choice.unpinned or decision.choice.replaces):
        description = _kernel_wheel_line(len(locked.distributions), decision.choice)
    if decision is not None:
        description += f"\n{decision.line()}"
        if not decision.kept and env:  # a prebuilt wheel: the build variables wait for a fallback
            description += f"\n{decision.fallback_line()}"
    if stage.kind == "script":
        description += f"\n{_script_build(plan)}"
    lock_line, said = _lock_env_line(locked, env) if locked else ("", ())
    return description + (f"\n{lock_line}" if lock_line else ""), said


def _script_build(plan: Plan) -> str:
    """What the plan says of verl's install script, which compiles its kernels here."""
    variant = plan.profile.cuda_variants.get(plan.variant)
    cuda = variant_window(plan.variant, variant).cuda if variant and plan.variant != "cpu" else None
    need = toolkit_need(cuda, plan.host.nvcc)
    return (
        "build: verl's script compiles its kernels here; its time is not estimated (the script "
        "sets its own MAX_JOBS)" + (f"; {need}" if need else "")
    )
