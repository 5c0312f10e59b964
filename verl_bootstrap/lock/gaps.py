"""What a `--locked` install does not check by hash, named: the one list the plan prints and
docs/security.md carries (a test keeps the page in step with `documented_gaps`).

Everything else a locked install takes is compared with a sha256 from the lockfile before it is
used: wheels and sdists (`--require-hashes`), the build env of each source build
(`--require-build-hashes`), verl's release sdist, and each conda package (its record's sha256,
or md5, against the lock's, before anything is linked).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from verl_bootstrap.lock.format import LockedStage, Lockfile

__all__ = ["GAPS", "LABELS", "documented_gaps", "gap_kinds", "hash_gaps"]

# kind -> (what is not hash-checked, what checks it instead); {what} names the stage's builds
GAPS: Final[dict[str, tuple[str, str]]] = {
    "verl-git": (
        "verl's own source (its git checkout, installed editable)",
        "its commit id, which must be the locked one",
    ),
    "unlocked-build": (
        "the build backend and build dependencies of {what}",
        "nothing: the lockfile records no build env for them (regenerate it with "
        "`verl-bootstrap lock`)",
    ),
    "pip-build": (
        "the build backend and build dependencies of {what}",
        "their locked versions only: pip cannot require hashes of build dependencies "
        "(the default installer, uv, does)",
    ),
    "kernel-unpinned": (
        "the prebuilt wheel {what} takes in place of the sdist the lockfile pins",
        "its build key, which must match the env's (the lockfile records no wheel for it: the "
        "env's own lock records its source, URL and sha256)",
    ),
    "kernel-unkeyed": (
        "the prebuilt wheel {what} takes in place of the sdist the lockfile pins, from a source "
        "whose file names state no torch or CUDA (it may re-upload other builds under the same "
        "name)",
        "nothing but the key the profile states for that source and the load check after install "
        "(the env's own lock records the file's sha256; a lock made with the network pins it)",
    ),
    "conda-unlocked": (
        "the conda packages of the env (its Python among them), which the lockfile does not hold",
        "nothing: they are solved from the channels when the env is made ({why}; regenerate "
        "it where they are reachable)",
    ),
    "conda-exe": (
        "the conda packages, installed by your own conda executable",
        "name, version and build (`verl-bootstrap verify --against LOCKFILE` compares them after)",
    ),
}
# what the route line calls each gap (the plan's hash_gaps say it in full)
LABELS: Final[dict[str, str]] = {
    "verl-git": "verl's git checkout",
    "unlocked-build": "unlocked build envs",
    "pip-build": "pip's build dependencies",
    "kernel-unpinned": "a kernel wheel",
    "kernel-unkeyed": "a kernel wheel whose source states no key",
    "conda-unlocked": "the conda packages (not locked)",
    "conda-exe": "the conda packages (your conda)",
}
_GENERIC_WHAT = "a stage's source builds"
_GENERIC = {
    "kernel-unpinned": "a kernel stage",
    "kernel-unkeyed": "a kernel stage",
}  # what the page says where a plan names a stage


# why a conda lock holds no packages, where the lockfile records no reason of its own
_CONDA_WHY = "the lock was made where the channels were unreachable"


def _line(kind: str, what: str | None = None, why: str | None = None) -> str:
    gap, how = GAPS[kind]
    what = what or _GENERIC.get(kind, _GENERIC_WHAT)
    return (
        f"not hash-checked: {gap.format(what=what)}, checked by {how.format(why=why or _CONDA_WHY)}"
    )


def documented_gaps() -> list[str]:
    """Every gap as docs/security.md states it."""
    return [_line(kind) for kind in GAPS]


def hash_gaps(
    lock: Lockfile,
    *,
    installer: str,
    conda_exe: bool,
    unpinned: Iterable[str] = (),
    unkeyed: Iterable[str] = (),
) -> list[str]:
    """The gaps of installing `lock` this way, one line each (empty: all of it is hash-checked).
    `unpinned`: the kernel stages that take a declared source's wheel the lockfile does not
    pin (it pins their sdist); `unkeyed`: those of them whose wheel's name states no key."""
    kinds = gap_kinds(
        lock, installer=installer, conda_exe=conda_exe, unpinned=unpinned, unkeyed=unkeyed
    )
    return [line for _, line in kinds]


def gap_kinds(
    lock: Lockfile,
    *,
    installer: str,
    conda_exe: bool,
    unpinned: Iterable[str] = (),
    unkeyed: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """(kind, line) of each gap, as `hash_gaps` lists them (the route line names the kinds)."""
    lines = []
    if lock.verl.kind == "git":
        lines.append(("verl-git", _line("verl-git")))
    for stage in _isolated_builds(lock.stages):
        what = _builds_of(stage)
        if not stage.build:
            lines.append(("unlocked-build", _line("unlocked-build", what)))
        elif installer == "pip":
            lines.append(("pip-build", _line("pip-build", what)))
    if lock.backend == "conda" and not lock.conda:
        lines.append(("conda-unlocked", _line("conda-unlocked", why=lock.conda_gap)))
    if lock.conda and conda_exe:
        lines.append(("conda-exe", _line("conda-exe")))
    named = set(unkeyed)
    for kind in ("kernel-unpinned", "kernel-unkeyed"):  # one line a kind: its stages named
        stages = [s for s in unpinned if (s in named) == (kind == "kernel-unkeyed")]
        if stages:
            lines.append((kind, _line(kind, _kernel_stages(stages))))
    return lines


def _kernel_stages(stages: list[str]) -> str:
    """'kernel stage a', or 'each of kernel stages a and b' (the gap's verb stays singular)."""
    if len(stages) == 1:
        return f"kernel stage {stages[0]}"
    return f"each of kernel stages {', '.join(stages[:-1])} and {stages[-1]}"


def _isolated_builds(stages: Iterable[LockedStage]) -> list[LockedStage]:
    """Stages that build something in an isolated build env (a stage built without isolation
    builds with the env's own packages, each installed hash-checked)."""
    return [
        s
        for s in stages
        if "--no-build-isolation" not in s.options
        and (s.kind == "install-verl" or any(d.source == "sdist" for d in s.distributions))
    ]


def _builds_of(stage: LockedStage) -> str:
    if stage.kind == "install-verl":
        return "verl's editable install"
    names = ", ".join(d.name for d in stage.distributions if d.source == "sdist")
    return f"stage {stage.id}'s source builds ({names})"
