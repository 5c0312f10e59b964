"""Lock a profile's stages in install order, each against the stages before it.

Stage N is resolved together with what earlier stages asked for, pinned to the versions they
locked (and with their overrides), so that their requests (torch, the engine) and the profile's
protected packages are hard constraints. verl itself, once its deps stage is in, is a requirement
of every later stage: it stays installed, so its ranges keep holding (TransferQueue asks for an
open `tensordict>=0.10.0`; verl caps it at 0.10.0, and a later stage must not float past that).
A dependency an earlier stage merely pulled in may otherwise move, as it would when stage N is
installed into the env; it is then recorded once, in the stage that installs its final version.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.resolve import Resolved, Target, compile_stage
from verl_bootstrap.lock.format import LockedDist, LockedStage
from verl_bootstrap.lock.making.uvlock import UvLockPin, uv_lock_constraints
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.profile.stagespec import StageSpec

__all__ = ["StageInputs", "lock_stages", "torch_cuda", "verl_version"]

_CUDA_RUNTIME = re.compile(r"^(cuda-toolkit|nvidia-cuda-runtime(-cu\d+)?)$")


@dataclass(frozen=True)
class StageInputs:
    """What every stage's resolution shares."""

    target: Target
    settings: IndexSettings
    checkout: Path  # verl's source, for the verl-deps stage
    verl_version: str
    protected: frozenset[str]
    work: Path
    # verl's uv.lock, exported, where the stack is the one it is made for (empty: none)
    uv_pins: Mapping[str, UvLockPin] = field(default_factory=dict)
    # the bounds an override erased that a release meets together with it (lock/making/bounds):
    # constraints on every stage
    bounds: tuple[str, ...] = ()
    # the profile's constraints (a stack of verl's uv.lock: its pins) on every stage
    constraints: tuple[str, ...] = ()
    # name -> version of the lock being regenerated: kept where they still fit (uv's rule)
    preferences: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Locked:
    """The running result: each distribution with the stage that installs its final version."""

    owner: dict[str, tuple[str, Resolved]] = field(default_factory=dict)
    requested: set[str] = field(default_factory=set)
    # (name, marker) -> override, the latest wins: verl overrides one name per platform
    overrides: dict[tuple[str, str], str] = field(default_factory=dict)
    verl: tuple[
        str, ...
    ] = ()  # verl's editable requirement (and its extras'), from its deps stage on

    def pins(self, names: Iterable[str]) -> list[str]:
        return sorted(
            f"{n}=={self.owner[n][1].version}"
            for n in names
            if n in self.owner and self.owner[n][1].source in ("wheel", "sdist")
        )


def lock_stages(
    specs: Sequence[StageSpec], inputs: StageInputs
) -> tuple[tuple[LockedStage, ...], list[Resolved]]:
    """The locked stages (install-verl first) and every distribution resolved."""
    state = _Locked()
    for number, spec in enumerate(specs, start=1):
        for dist in _lock_stage(spec, number, inputs, state):
            earlier = state.owner.get(dist.name)
            moved = earlier is None or earlier[1].version != dist.version
            if dist.source != "editable" and moved:
                state.owner[dist.name] = (spec.id, dist)
        state.requested |= _names(spec.packages)
        state.overrides.update(_by_key(spec.overrides))
        state.verl = _verl_requirement(spec, inputs) or state.verl
    verl = LockedDist(name="verl", version=inputs.verl_version, source="editable")
    stages = [
        LockedStage(
            id="install-verl",
            kind="install-verl",
            options=("--no-deps", "-e"),
            distributions=(verl,),
        )
    ]
    for spec in specs:
        mine = [r for stage_id, r in state.owner.values() if stage_id == spec.id]
        stages.append(_stage(spec, mine))
    return tuple(stages), [r for _, r in state.owner.values()]


def _names(specs: Iterable[str]) -> set[str]:
    names: set[str] = set()
    for spec in specs:
        try:
            names.add(canonicalize_name(Requirement(spec).name))
        except InvalidRequirement as exc:
            raise InputError(f"package {spec!r} is not a requirement: {exc}") from None
    return names


def _by_key(specs: Iterable[str]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for line in specs:
        req = Requirement(line)
        out[(canonicalize_name(req.name), str(req.marker or ""))] = line
    return out


def _lock_stage(
    spec: StageSpec, number: int, inputs: StageInputs, state: _Locked
) -> list[Resolved]:
    if spec.kind == "script":
        raise InputError(
            f"stage {spec.id!r} runs verl's script {spec.script}: what a script installs "
            "cannot be locked",
            hint="write the stage as packages (kind: packages) to lock it",
        )
    stem = inputs.work / f"{number:02d}-{spec.id}"
    if spec.no_deps:  # installed without its dependencies: its own packages alone
        atomic_write(stem.with_suffix(".in"), "\n".join(spec.packages) + "\n")
        extra = ["--no-deps"]
    else:
        extra = _carried(spec, stem, inputs, state)
    return compile_stage(
        stem.with_suffix(".in"),
        target=_stage_target(inputs.target, spec),
        settings=inputs.settings,
        stage_index=spec.index,
        extra=extra,
        log_path=stem.with_suffix(".log"),
        preferences=inputs.preferences,
    )


def _carried(spec: StageSpec, stem: Path, inputs: StageInputs, state: _Locked) -> list[str]:
    """The stage's requirements with earlier stages' pins and overrides (and verl's extras from
    its deps stage on); the flags that carry them."""
    carried = state.pins(state.requested)
    verl = _verl_requirement(spec, inputs) or state.verl
    lines = [*verl, *spec.packages, *carried]
    atomic_write(stem.with_suffix(".in"), "\n".join(lines) + "\n")
    hard = state.pins(state.requested | (inputs.protected & state.owner.keys()))
    hard += uv_lock_constraints(inputs.uv_pins, spec.substitutions) + list(inputs.bounds)
    hard += list(inputs.constraints)
    extra = _file_flag(stem, "constraints", "--constraint", hard)
    # earlier stages' packages are carried, so their overrides are too (this stage's win); what
    # a later stage installs is left out of this one (not carried: that stage installs it)
    overrides = {**state.overrides, **_by_key(spec.overrides)}
    dropped = _by_key(spec.exclusion_overrides())
    names = {name for name, _ in dropped}
    overrides = {k: v for k, v in overrides.items() if k[0] not in names} | dropped
    return extra + _file_flag(stem, "overrides", "--override", sorted(overrides.values()))


def _verl_requirement(spec: StageSpec, inputs: StageInputs) -> tuple[str, ...]:
    """verl's checkout, editable, with what its deps stage asks of verl's extras (that stage
    only): their requirements as lines where the stage splits them, else the extras by name."""
    if spec.kind != "verl-deps":
        return ()
    if spec.verl_lines:
        return (f"-e {inputs.checkout}", *spec.verl_lines)
    extras = f"[{','.join(spec.extras)}]" if spec.extras else ""
    return (f"-e {inputs.checkout}{extras}",)


def _stage_target(target: Target, spec: StageSpec) -> Target:
    """A stage cut off earlier (a per-release stack's `exclude_newer`) resolves as of that day."""
    own = spec.env.get("UV_EXCLUDE_NEWER")
    if own and own < target.exclude_newer:
        return replace(target, exclude_newer=own)
    return target


def _file_flag(stem: Path, kind: str, flag: str, lines: Sequence[str]) -> list[str]:
    if not lines:
        return []
    path = stem.with_suffix(f".{kind}.txt")
    atomic_write(path, "\n".join(lines) + "\n")
    return [flag, str(path)]


def _stage(spec: StageSpec, dists: Sequence[Resolved]) -> LockedStage:
    flags = ["--no-deps"]
    if spec.no_build_isolation:
        flags.append("--no-build-isolation")
    return LockedStage(
        id=spec.id,
        kind=spec.kind,
        options=tuple(flags),
        env=dict(spec.env),
        distributions=tuple(_dist(r, spec) for r in sorted(dists, key=lambda r: r.name)),
    )


def _dist(dist: Resolved, spec: StageSpec) -> LockedDist:
    built = dist.source in ("sdist", "git")
    return LockedDist(
        name=dist.name,
        version=dist.version,
        source=dist.source,
        hashes=dist.hashes,
        index=dist.index,
        url=dist.url,
        commit=dist.commit,
        build_env=dict(spec.env) if built else {},
    )


def verl_version(checkout: Path, ref: str) -> str:
    """verl's version from its checkout (verl/version/version), else from the release tag."""
    version_file = checkout / "verl" / "version" / "version"
    if version_file.is_file():
        return version_file.read_text(encoding="utf-8").strip()
    return ref.lstrip("v")


def torch_cuda(dists: Iterable[Resolved]) -> tuple[str | None, str | None]:
    """(torch version, CUDA X.Y of its build): the CUDA runtime torch requires, if any.

    torch names its CUDA either directly (nvidia-cuda-runtime-cu12 12.8.x) or through the
    cuda-toolkit meta package (13.0.x); a CPU build requires neither.
    """
    by_name = {d.name: d for d in dists}
    torch = by_name.get("torch")
    if torch is None:
        return None, None
    children: dict[str, list[str]] = {}
    for dist in by_name.values():
        for parent in dist.via:
            children.setdefault(parent, []).append(dist.name)
    seen, frontier = {"torch"}, ["torch"]
    for _ in range(3):  # torch -> cuda-toolkit -> nvidia-cuda-runtime at most
        frontier = sorted({c for n in frontier for c in children.get(n, ())} - seen)
        runtime = next((n for n in frontier if _CUDA_RUNTIME.match(n)), None)
        if runtime is not None:
            release = Version(by_name[runtime].version).release
            return torch.version, f"{release[0]}.{release[1]}"
        seen.update(frontier)
    return torch.version, None
