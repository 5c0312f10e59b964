"""The plan: a pure compilation of (profile, options, host facts) into an ordered step graph.

Nothing here touches the disk or the network, so `plan` can print it and tests can assert on it.
Whatever order a profile lists, verl's editable install precedes every accelerator stage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

from installer.errors import InputError
from installer.gpu.model import DriverInfo
from installer.host.facts import HostFacts
from installer.host.indexes import IndexSettings
from installer.options import RunOptions
from installer.paths import state_dir
from installer.plan.locked import LockedInstall, locked_source_spec, locked_stage_specs
from installer.profile.models import Profile
from installer.profile.stagespec import StageSpec, stage_specs
from installer.steps.source import SourceSpec

__all__ = ["Plan", "Step", "compile_plan"]


@dataclass(frozen=True)
class Step:
    """One node of the graph. `commands` are what it runs (shown by `plan`, fingerprinted)."""

    id: str
    kind: str
    deps: tuple[str, ...]
    description: str
    commands: tuple[tuple[str, ...], ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """The compiled graph and every decision that shaped it."""

    profile: Profile
    options: RunOptions
    variant: str
    variant_reason: str
    backend: str
    interpreter: Path | None
    source: SourceSpec
    settings: IndexSettings
    stages: tuple[StageSpec, ...]
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = ()
    driver: DriverInfo | None = None
    locked: LockedInstall | None = None  # --locked/--frozen: the lockfile the stages install

    @property
    def prefix(self) -> Path:
        """Where the env lives."""
        return self.options.prefix

    def step(self, step_id: str) -> Step:
        """The step with this id."""
        return next(s for s in self.steps if s.id == step_id)

    def fingerprints(self) -> dict[str, str]:
        """Each step's fingerprint: its own inputs chained with its dependencies' fingerprints."""
        out: dict[str, str] = {}
        for step in self.steps:  # steps are in dependency order
            body = {
                "kind": step.kind,
                # the installer's own path changes when the tool is reinstalled; its name does not
                "commands": [(Path(c[0]).name, *c[1:]) for c in step.commands if c],
                "inputs": step.inputs,
                "deps": [out[d] for d in step.deps],
            }
            blob = json.dumps(body, sort_keys=True, default=str).encode()
            out[step.id] = hashlib.sha256(blob).hexdigest()[:16]
        return out


def compile_plan(
    profile: Profile, options: RunOptions, host: HostFacts, *, locked: LockedInstall | None = None
) -> Plan:
    """Compile the graph: create-env ∥ fetch-source → install-verl → stages → record-lock → verify.

    With `locked`, the stages are the lockfile's and verl's source is the locked one.
    """
    from installer.steps.commands import step_commands  # noqa: PLC0415 - avoids an import cycle

    stages = stage_specs(profile, host.variant)
    source = SourceSpec.from_profile(profile, options, state_dir(options.prefix))
    settings = host.settings
    if locked is not None:
        stages = locked_stage_specs(locked.lock)
        source = locked_source_spec(source, locked.lock)
        # every pin already met pip's constraints when it was locked; --require-hashes refuses
        # unpinned constraint lines
        settings = replace(settings, constraints=())
    backend = options.backend or profile.env.backend
    draft = Plan(
        profile=profile,
        options=options,
        variant=host.variant,
        variant_reason=host.variant_reason,
        backend=backend,
        interpreter=host.interpreter,
        source=source,
        settings=settings,
        stages=stages,
        steps=(),
        notes=host.notes,
        driver=host.driver,
        locked=locked,
    )
    steps = _order(step_commands(draft))
    return Plan(**{**draft.__dict__, "steps": steps})


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
