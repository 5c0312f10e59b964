"""The plan: a pure compilation of (profile, options, host facts) into an ordered step graph.

Nothing here touches the disk or the network, so `plan` can print it and tests can assert on it.
Whatever order a profile lists, verl's editable install precedes every accelerator stage.
"""

from __future__ import annotations

from dataclasses import replace
from graphlib import CycleError, TopologicalSorter

from verl_bootstrap.errors import InputError
from verl_bootstrap.kernels.planning import KernelDecision, plan_kernels, stage_queries
from verl_bootstrap.lock.format import profile_hash
from verl_bootstrap.lock.installing.kernels import locked_queries
from verl_bootstrap.lock.installing.prepare import (
    LockedInstall,
    locked_source_spec,
    locked_stage_specs,
)
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import state_dir
from verl_bootstrap.plan.facts import HostFacts
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.run.steps.kinds import plan_steps
from verl_bootstrap.source.spec import SourceSpec

__all__ = ["attach_locked", "compile_plan"]


def compile_plan(
    profile: Profile,
    options: RunOptions,
    host: HostFacts,
    *,
    locked: LockedInstall | None = None,
    digest: str | None = None,
) -> Plan:
    """Compile the graph: create-env ∥ fetch-source → install-verl → stages → record-lock → verify.

    With `locked`, the stages are the lockfile's and verl's source is the locked one. `digest`:
    the profile hash of the profile before a lockfile narrowed it (default: `profile`'s own).
    """
    draft = Plan(
        profile_hash=digest or profile_hash(profile, host.variant),
        profile=profile,
        options=options,
        host=host,
        source=SourceSpec.from_profile(profile, options, state_dir(options.prefix)),
        settings=host.settings,
        stages=stage_specs(profile, host.variant),
        steps=(),
        named_lockfile=options.lockfile,
    )
    if locked is not None:
        draft = attach_locked(draft, locked)
    draft = replace(draft, kernels=_kernels(draft))
    steps = _order(plan_steps(draft))
    return replace(draft, steps=tuple(replace(s, locked=draft.locked_stage(s.id)) for s in steps))


def attach_locked(plan: Plan, locked: LockedInstall) -> Plan:
    """`plan` (not yet described into steps) installing exactly `locked`'s lockfile: the one
    place --locked changes a plan. Its stages become the lockfile's (each with the kernel spec and
    the env variables of the profile's stage of that id), verl's source the locked sdist or
    commit, and the index settings lose pip's constraints: every pin already met them when it
    was locked, and --require-hashes refuses unpinned constraint lines."""
    kernels = {s.id: s.kernel for s in plan.stages if s.kernel}
    envs = {s.id: s.env for s in plan.stages}
    return replace(
        plan,
        stages=locked_stage_specs(locked.lock, kernels, envs),
        source=locked_source_spec(plan.source, locked.lock),
        settings=replace(plan.settings, constraints=()),
        locked=locked,
    )


def _kernels(plan: Plan) -> dict[str, KernelDecision]:
    host = plan.host
    if host.kernels is None:
        return {}
    if plan.locked is not None:
        kernels = {s.id: s.kernel for s in plan.stages if s.kernel}
        online = not plan.options.offline
        queries = locked_queries(plan.locked.lock, kernels, host.kernels, online=online)
    else:
        # a stage that takes verl's pins names bare packages; the torch it must leave is its expect
        listed = tuple((s.id, s.promised(), s.kernel) for s in plan.stages)
        queries = stage_queries(listed, plan.profile, host.variant, host.kernels)
    flags = plan.options.cuda_arch
    return plan_kernels(queries, host=host.kernels, driver=host.driver, flags=flags)


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
