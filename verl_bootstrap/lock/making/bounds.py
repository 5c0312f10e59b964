"""Overrides only where they are forced: the stages locked, then every pin checked against its
locked wheels' own requirements (locking.forced). Where an override erased a requirement that
some release meets together with the override (numba's `numpy<2.5` under verl's
`numpy>=2.0.0`), that requirement becomes a constraint of every stage and the stages are locked
again; where no release meets both, the override forces the mismatch and the lock records it.
Under verl's own uv.lock nothing is restored: its versions are verl's, and a mismatch they carry
is recorded as forced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, InputError, StepFailed
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.resolve import Resolved, index_args
from verl_bootstrap.installer.wheelmeta import WheelFile
from verl_bootstrap.lock.format import ForcedMismatch, LockedStage
from verl_bootstrap.lock.making.forced import Mismatch
from verl_bootstrap.lock.making.stages import StageInputs, lock_stages
from verl_bootstrap.lock.making.wheelreqs import judge
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.profile.stagespec import StageSpec

__all__ = ["Bounded", "forced_of", "lock_with_bounds"]

_ROUNDS = 4  # a restored bound can move another pin; a few rounds settle it
Bounded = tuple[tuple[LockedStage, ...], list[Resolved], tuple[ForcedMismatch, ...], list[str]]


def lock_with_bounds(specs: Sequence[StageSpec], inputs: StageInputs, *, restore: bool) -> Bounded:
    """The locked stages, every distribution resolved, the mismatches overrides force, and the
    notes (what was restored, what could not be read). `restore`: take a release that meets an
    erased bound where one exists (False under verl's uv.lock)."""
    pyproject = inputs.checkout / "pyproject.toml"
    bounds: list[str] = []
    for _ in range(_ROUNDS):
        stages, resolved = lock_stages(specs, replace(inputs, bounds=tuple(bounds)))
        judged = judge(stages, _wheels(resolved), specs, target=inputs.target, pyproject=pyproject)
        _refuse_broken(judged.found)
        erased = [m for m in judged.found if m.override is not None]
        new = [m.requirement for m in erased if restore and _restorable(m, inputs)]
        if not new:
            return (
                stages,
                resolved,
                tuple(m.record() for m in erased),
                _notes(bounds, judged.unread),
            )
        bounds += [b for b in dict.fromkeys(new) if b not in bounds]
    raise StepFailed(
        f"the lock did not settle in {_ROUNDS} rounds of restoring erased bounds: "
        + ", ".join(bounds),
        hint="state the bound in the profile (a stage's package) and lock again",
    )


def _wheels(resolved: Sequence[Resolved]) -> list[WheelFile]:
    """One served wheel per resolved wheel distribution (the first uv listed)."""
    return [WheelFile(r.name, *r.files[0]) for r in resolved if r.source == "wheel" and r.files]


def _refuse_broken(found: Sequence[Mismatch]) -> None:
    """A pin outside a wheel's requirement that no override explains: the resolution is wrong."""
    broken = [m.line() for m in found if m.override is None]
    if broken:
        raise InputError(
            "the locked pins break their own requirements: " + "; ".join(broken),
            hint="a stage installed without dependencies, or an earlier stage's pin, leaves it: "
            "state the requirement in the profile",
        )


def _restorable(mismatch: Mismatch, inputs: StageInputs) -> bool:
    """Whether a release of the package meets both the override and the erased requirement."""
    assert mismatch.override is not None
    work = inputs.work / "bounds"
    work.mkdir(parents=True, exist_ok=True)
    wanted = work / f"{mismatch.package}.in"
    atomic_write(wanted, f"{mismatch.override}\n{mismatch.requirement}\n")
    argv = [uv_binary(), "pip", "compile", str(wanted), "--no-deps", "--no-header", "--quiet"]
    argv += [*inputs.target.uv_args(), *index_args(inputs.settings, None)]
    try:
        proc.run(argv, log_path=work / f"{mismatch.package}.log")
    except CommandFailed as exc:
        reason = " ".join(line.strip() for line in exc.tail if line.strip())
        if "No solution found" in reason:
            return False
        raise StepFailed(
            f"could not ask the index for a {mismatch.package} that meets both "
            f"{mismatch.override!r} and {mismatch.requirement!r}: {reason}",
            hint=f"the full log is {work / f'{mismatch.package}.log'}",
        ) from None
    return True


def _notes(bounds: Sequence[str], unread: Sequence[str]) -> list[str]:
    notes = []
    if bounds:
        notes.append(
            "restored bounds an override erased (a release meets both): " + ", ".join(bounds)
        )
    if unread:
        notes.append(
            "not checked against their own requirements (metadata not read here): "
            + ", ".join(unread)
        )
    return notes


def forced_of(lock_forced: Sequence[ForcedMismatch]) -> list[str]:
    """The lines `lock` says of the forced mismatches it records."""
    return [f"forced by an override, recorded: {f.line()}" for f in lock_forced]
