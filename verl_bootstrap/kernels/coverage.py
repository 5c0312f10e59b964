"""Which prebuilt source serves each kernel stage of each shipped stack: for every profile x CUDA
variant x platform at the profile's default Python, the first declared source (in the site's
order) whose recorded list has a wheel for the stack's key, or a source build and why. Pure: it
reads the profiles and the recorded lists, never the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.kernels.kernelchoice import KernelQuery, choose
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.planning import cxx11_abi
from verl_bootstrap.kernels.record import KernelRecord
from verl_bootstrap.kernels.sources import Passed, pinned_version
from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.profile.load import PROFILES_DIR, list_profiles, load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import stage_specs

__all__ = ["PLATFORMS", "CoverageRow", "coverage", "stack_keys"]

# The platforms the GPU profiles ship lockfiles for.
PLATFORMS = ("linux_x86_64", "linux_aarch64")


@dataclass(frozen=True)
class CoverageRow:
    """One kernel stage of one stack: what serves it."""

    profile: str
    variant: str
    platform: str
    stage: str
    key: BuildKey
    source: str  # the declared source's id, or "source build"
    trust: str | None
    wheel: str | None
    why: str
    passed: tuple[Passed, ...] = ()  # a source build: the sources passed over, as `why` says

    def to_json(self) -> dict[str, object]:
        """The row as `kernels coverage --json` gives it."""
        return {
            "profile": self.profile,
            "variant": self.variant,
            "platform": self.platform,
            "python": self.key.python,
            "stage": self.stage,
            "torch": self.key.torch,
            "cuda": self.key.cuda,
            "source": self.source,
            "trust": self.trust,
            "wheel": self.wheel,
            "why": self.why,
            "passed_over": [p.to_json() for p in self.passed],
        }


def coverage(
    record: KernelRecord,
    *,
    search: Path = PROFILES_DIR,
    profiles: Sequence[str] | None = None,
    order: Sequence[str] | None = None,
    platforms: Sequence[str] = PLATFORMS,
) -> list[CoverageRow]:
    """A row per kernel stage of every shipped profile's default stack."""
    rows = []
    for name in profiles or list_profiles(search):
        profile = load_profile(name, search=search)
        for variant in sorted(v for v in profile.cuda_variants if v != "cpu"):
            for platform in platforms:
                rows.extend(_stack(profile, variant, platform, record, order))
    return rows


def stack_keys(
    profile: Profile, variant: str, platform: str, python_xy: str | None = None
) -> list[tuple[str, tuple[str, ...], KernelSpec, BuildKey]]:
    """(stage id, packages, kernel, the env's expected key) for each kernel stage of a stack, at
    `python_xy` ("3.12"; default: the profile's preferred Python)."""
    seen: list[str] = []
    out = []
    python = "cp" + "".join((python_xy or profile.python.prefer).split(".")[:2])
    cuda = "cpu" if variant == "cpu" else profile.cuda_variants[variant].cuda
    for spec in stage_specs(profile, variant):
        seen.extend(spec.promised())  # the torch an engine stage leaves, before its packages
        if spec.kernel is not None:
            torch = pinned_version(seen, "torch")
            key = BuildKey(torch, cuda, cxx11_abi(torch), python, platform)
            out.append((spec.id, spec.packages, spec.kernel, key))
    return out


def _stack(
    profile: Profile,
    variant: str,
    platform: str,
    record: KernelRecord,
    order: Sequence[str] | None,
) -> list[CoverageRow]:
    rows = []
    for stage, packages, kernel, key in stack_keys(profile, variant, platform):
        version = pinned_version(packages, kernel.distribution, key)
        asked = None if order is None else tuple(order)
        choice = choose(KernelQuery(kernel, version, key, packages, record=record, order=asked))
        if choice.source in {"build", "stage"}:
            why = choice.reason.removeprefix("source build: ") + _cost(kernel)
            rows.append(
                CoverageRow(
                    profile.name,
                    variant,
                    platform,
                    stage,
                    key,
                    "source build",
                    None,
                    None,
                    why,
                    choice.passed,
                )
            )
            continue
        why = f"listed {choice.listed}" if choice.listed else "not in the recorded list"
        served = choice.origin or choice.source
        row = CoverageRow(
            profile.name, variant, platform, stage, key, served, choice.trust, choice.wheel, why
        )
        rows.append(row)
    return rows


def _cost(kernel: KernelSpec) -> str:
    if kernel.build_minutes is None:
        return ""
    per = " per GPU architecture" if kernel.build_per_arch else ""
    return f"; a source build takes about {kernel.build_minutes:g} min{per} on 16 cores"
