"""The plan: a pure compilation of (profile, options, host facts) into an ordered step graph.

Nothing here touches the disk or the network, so `plan` can print it and tests can assert on it.
Whatever order a profile lists, verl's editable install precedes every accelerator stage.
"""

from __future__ import annotations

from dataclasses import replace
from graphlib import CycleError, TopologicalSorter

from verl_bootstrap.errors import InputError
from verl_bootstrap.kernels.locked import plan_locked_kernels
from verl_bootstrap.kernels.planning import KernelDecision, plan_kernels
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import state_dir
from verl_bootstrap.plan.facts import HostFacts
from verl_bootstrap.plan.locked import LockedInstall, locked_source_spec, locked_stage_specs
from verl_bootstrap.plan.model import Plan, Step
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import StageSpec, stage_specs
from verl_bootstrap.source.spec import SourceSpec
from verl_bootstrap.steps.kinds import plan_steps

__all__ = ["compile_plan"]


def compile_plan(
    profile: Profile, options: RunOptions, host: HostFacts, *, locked: LockedInstall | None = None
) -> Plan:
    """Compile the graph: create-env ∥ fetch-source → install-verl → stages → record-lock → verify.

    With `locked`, the stages are the lockfile's and verl's source is the locked one.
    """
    stages = stage_specs(profile, host.variant)
    source = SourceSpec.from_profile(profile, options, state_dir(options.prefix))
    settings = host.settings
    if locked is not None:
        stages = locked_stage_specs(locked.lock, {s.id: s.kernel for s in stages if s.kernel})
        source = locked_source_spec(source, locked.lock)
        # every pin already met pip's constraints when it was locked; --require-hashes refuses
        # unpinned constraint lines
        settings = replace(settings, constraints=())
    draft = Plan(
        profile=profile,
        options=options,
        host=host,
        source=source,
        settings=settings,
        stages=stages,
        steps=(),
        locked=locked,
        kernels=_kernels(profile, options, host, stages, locked),
    )
    steps = _order(plan_steps(draft))
    return Plan(**{**draft.__dict__, "steps": steps})


def _kernels(
    profile: Profile,
    options: RunOptions,
    host: HostFacts,
    stages: tuple[StageSpec, ...],
    locked: LockedInstall | None,
) -> dict[str, KernelDecision]:
    if host.kernels is None:
        return {}
    if locked is not None:
        return plan_locked_kernels(
            locked.lock, {s.id: s.kernel for s in stages if s.kernel}, host=host.kernels,
            driver=host.driver, flags=options.cuda_arch,
        )  # fmt: skip
    # a stage that takes verl's pins names bare packages; the torch it must leave is its expect
    listed = tuple((s.id, s.promised(), s.kernel) for s in stages)
    return plan_kernels(
        listed, profile=profile, variant=host.variant, host=host.kernels,
        driver=host.driver, flag_archs=options.cuda_arch,
    )  # fmt: skip


def _order(steps: list[Step]) -> tuple[Step, ...]:
    """A stable topological order (profile order wins when free); a cycle is an InputError."""
    by_id = {s.id: s for s in steps}
    sorter: TopologicalSorter[str] = TopologicalSorter()
    for step in steps:
        missing = [d for d in step.deps if d not in by_id]
        if missing:
            raise InputError(f"step {step.id!r} depends on unknown step(s) {missing}")
        sorter.add(step.id, *step.deps)
    try:
        sorter.prepare()
    except CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise InputError(f"the plan has a cycle: {cycle}") from exc
    rank = {s.id: i for i, s in enumerate(steps)}
    ordered: list[Step] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=rank.__getitem__)
        ordered.extend(by_id[i] for i in ready)
        sorter.done(*ready)
    return tuple(ordered)
