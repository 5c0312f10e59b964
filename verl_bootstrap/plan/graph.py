"""The plan's data: the compiled step graph and every decision that shaped it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.kernels.planning import KernelDecision
from verl_bootstrap.lock.format import LockedStage, Lockfile, UvLockUse
from verl_bootstrap.lock.gaps import gap_kinds
from verl_bootstrap.lock.installing.prepare import LockedInstall
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.facts import HostFacts
from verl_bootstrap.plan.stepcontract import NoInputs, StepInputs
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import StageSpec
from verl_bootstrap.source.spec import SourceSpec

if TYPE_CHECKING:  # the bundle package is loaded only by a run that names one
    from verl_bootstrap.lock.bundle.bundleinstall import OpenedBundle

__all__ = ["Plan", "Step"]


@dataclass(frozen=True)
class Step:
    """One node of the graph. `commands` are what it runs (shown by `plan`, fingerprinted)."""

    id: str
    kind: str
    deps: tuple[str, ...]
    description: str
    commands: tuple[tuple[str, ...], ...] = ()
    inputs: StepInputs = field(default_factory=NoInputs)  # what its fingerprint covers
    # the variables its commands run with (shown by `plan`; sizing is not part of the fingerprint)
    env: Mapping[str, str] = field(default_factory=dict)
    # those of `env` its description already states with their values (what a lockfile sets):
    # the text plan says each variable once
    env_said: tuple[str, ...] = ()
    # --locked: the lockfile's stage of this id, attached when the plan is compiled (its inputs
    # carry what of it the fingerprint needs)
    locked: LockedStage | None = None


@dataclass(frozen=True)
class Plan:
    """The compiled graph and every decision that shaped it."""

    profile: Profile
    options: RunOptions
    host: HostFacts  # the machine, and the env it gets here (backend, channels)
    source: SourceSpec
    settings: IndexSettings
    stages: tuple[StageSpec, ...]
    steps: tuple[Step, ...]
    locked: LockedInstall | None = None  # --locked/--frozen: the lockfile the stages install
    kernels: Mapping[str, KernelDecision] = field(default_factory=dict)  # stage id -> decision
    route: str = ""  # the run's first line: which lockfile it installs, or why it resolves
    # the lockfile the record names (plan.choices.Choices.named_lockfile); options stay as given
    named_lockfile: Path | None = None
    opened: OpenedBundle | None = None  # --bundle: the bundle checked and unpacked for this plan
    # the profile hash (lockfile.format.profile_hash) of the profile as this run resolves it, before
    # a lockfile narrows its Python: the one a lockfile of it carries, and the env's record shows
    profile_hash: str = ""
    # the stack is verl's uv.lock's slice (plan.choices): the env's lockfile records it, as `lock`
    uv_lock: UvLockUse | None = None

    # What the steps read: the choices as they resolved (steps never reach into the options).
    @property
    def prefix(self) -> Path:
        """Where the env lives."""
        return self.options.prefix

    @property
    def variant(self) -> str:
        return self.host.variant

    @property
    def variant_reason(self) -> str:
        return self.host.variant_reason

    @property
    def backend(self) -> str:
        return self.host.backend

    @property
    def channels(self) -> tuple[str, ...]:
        return self.host.channels

    @property
    def interpreter(self) -> Path | None:
        return self.host.interpreter

    @property
    def driver(self) -> DriverInfo | None:
        return self.host.driver

    @property
    def notes(self) -> tuple[str, ...]:
        return self.host.notes

    @property
    def installer(self) -> str:
        return self.options.installer

    @property
    def offline(self) -> bool:
        return self.options.offline

    @property
    def conda_exe(self) -> str | None:
        return self.options.conda_exe

    @property
    def require_gpu(self) -> bool:
        return self.options.require_gpu

    @property
    def skip_checks(self) -> tuple[str, ...]:
        return self.options.skip_checks

    @property
    def profile_ref(self) -> str:
        """The profile as the user named it (a shipped name or a YAML file)."""
        return self.options.profile

    @property
    def allow_unsupported_ref(self) -> bool:
        return self.options.allow_unsupported_ref

    @property
    def kernel_sources(self) -> tuple[str, ...] | None:
        """The prebuilt kernel sources the site config turns on, in order (None: every one)."""
        return self.options.site.kernel_sources

    @property
    def wheelhouse(self) -> str | None:
        """The lab wheelhouse folder (None: the tool home's)."""
        return self.options.site.wheelhouse

    @property
    def bundle_kernels(self) -> Path | None:
        """The kernel wheels of the bundle installed from (a read-only wheelhouse), if any."""
        return self.options.site.bundle_kernels

    @property
    def lockfile(self) -> Lockfile | None:
        """The lockfile this run installs exactly (None: the run resolves)."""
        return None if self.locked is None else self.locked.lock

    @property
    def locked_artifacts(self) -> Mapping[str, Artifact]:
        """The locked artifacts as looked up and hash-checked before the run (none: resolving)."""
        return {} if self.locked is None else self.locked.artifacts

    def locked_stage(self, step_id: str) -> LockedStage | None:
        """The lockfile's stage a step installs (None when the run installs no lockfile): the
        stage of its id; for install-verl, the lock's install-verl stage whatever its id."""
        if self.locked is None:
            return None
        verl = step_id == "install-verl"
        found = (
            s for s in self.locked.lock.stages if s.id == step_id or (verl and s.kind == step_id)
        )
        return next(found, None)

    @property
    def hash_gaps(self) -> list[str]:
        """What this run takes without a hash check (`--locked` only; see lockfile.gaps)."""
        return [line for _, line in self.hash_gap_kinds]

    @property
    def hash_gap_kinds(self) -> list[tuple[str, str]]:
        """(kind, line) of each hash gap: the route line names the kinds."""
        if self.locked is None:
            return []
        conda_exe = self.conda_exe is not None and self.backend != "venv"
        unpinned = [i for i, d in self.kernels.items() if d.choice.unpinned]
        unkeyed = [i for i, d in self.kernels.items() if d.choice.unpinned and d.choice.unnamed]
        return gap_kinds(
            self.locked.lock,
            installer=self.installer,
            conda_exe=conda_exe,
            unpinned=unpinned,
            unkeyed=unkeyed,
        )

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
                "inputs": step.inputs.fingerprint_body(),
                "deps": [out[d] for d in step.deps],
            }
            blob = json.dumps(body, sort_keys=True, default=str).encode()
            out[step.id] = hashlib.sha256(blob).hexdigest()[:16]
        return out
