"""The plan's decision for each kernel stage, on either route (one `plan_kernels` for the
resolving route's `stage_queries` and a lock's `lockinstall.kernels.locked_queries`): the build key
the env is expected to have, the source that key selects (and why), and the variables that size a
source build."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from packaging.version import InvalidVersion, Version

from verl_bootstrap.gpu.model import DriverInfo
from verl_bootstrap.kernels.choices import KernelQuery, choose
from verl_bootstrap.kernels.host import KernelHost
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.sizing import (
    DEFAULT_ARCH_COUNT,
    BuildSizing,
    arch_variables,
    choose_archs,
    choose_max_jobs,
    device_passes,
)
from verl_bootstrap.kernels.sources import KernelChoice, pinned_version
from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.profile.models import Profile

__all__ = [
    "KernelDecision",
    "cxx11_abi",
    "decision",
    "expected_key",
    "for_host",
    "plan_kernels",
    "stage_queries",
]

# PyPI's torch wheels use the C++11 ABI from 2.7 on (earlier ones the pre-C++11 ABI).
_CXX11_FROM = Version("2.7")


@dataclass(frozen=True)
class KernelDecision:
    """One kernel stage's plan: its expected key, chosen source, sizing and variables."""

    key: BuildKey
    choice: KernelChoice
    sizing: BuildSizing
    env: Mapping[str, str] = field(default_factory=dict)
    estimate: str = ""

    def line(self) -> str:
        """What the plan says about the stage."""
        return f"kernel: {self.choice.reason}{self.estimate}"


def plan_kernels(
    queries: Mapping[str, KernelQuery],
    *,
    host: KernelHost,
    driver: DriverInfo | None,
    flags: tuple[str, ...],
) -> dict[str, KernelDecision]:
    """stage id -> decision, on either route (`stage_queries`,
    `lockinstall.kernels.locked_queries`): each query's first candidate, asked of the host's
    wheelhouse and recorded sources."""
    out = {}
    for stage_id, query in queries.items():
        choice = choose(for_host(query, host))
        out[stage_id] = decision(
            query.kernel, query.key, choice, host=host, driver=driver, flags=flags
        )
    return out


def stage_queries(
    stages: tuple[tuple[str, tuple[str, ...], KernelSpec | None], ...],
    profile: Profile,
    variant: str,
    host: KernelHost,
) -> dict[str, KernelQuery]:
    """The resolving route's query for each (id, packages, kernel) whose kernel is set, with the
    key the env is expected to have when the stage runs."""
    out: dict[str, KernelQuery] = {}
    seen: list[str] = []
    for stage_id, packages, kernel in stages:
        seen.extend(packages)
        if kernel is not None:
            key = expected_key(seen, profile, variant, host)
            version = pinned_version(packages, kernel.distribution, key)
            out[stage_id] = KernelQuery(kernel, version, key, packages)
    return out


def for_host(query: KernelQuery, host: KernelHost) -> KernelQuery:
    """`query` asking the host's lab wheelhouse (as read for the plan) and its recorded, ordered
    declared sources."""
    root = str(host.wheelhouse)
    return replace(query, entries=host.entries, root=root, record=host.record, order=host.order)


def expected_key(packages: list[str], profile: Profile, variant: str, host: KernelHost) -> BuildKey:
    """The key the env will have, from the torch the stages pin (checked again at run time)."""
    torch = pinned_version(packages, "torch")
    cuda = "cpu" if variant == "cpu" else _variant_cuda(profile, variant)
    return BuildKey(
        torch=torch,
        cuda=cuda,
        cxx11abi=cxx11_abi(torch),
        python=host.python,
        platform=host.platform,
    )


def _variant_cuda(profile: Profile, variant: str) -> str | None:
    spec = profile.cuda_variants.get(variant)
    return spec.cuda if spec else None


def cxx11_abi(torch: str | None) -> bool | None:
    """Whether the index's torch of this version uses the C++11 ABI (unknown: None)."""
    try:
        return None if torch is None else Version(torch) >= _CXX11_FROM
    except InvalidVersion:
        return None


def decision(
    kernel: KernelSpec,
    key: BuildKey,
    choice: KernelChoice,
    *,
    host: KernelHost,
    driver: DriverInfo | None,
    flags: tuple[str, ...],
) -> KernelDecision:
    """The stage's decision: `choice`, with the variables that size a source build."""
    archs, arch_why = choose_archs(driver, flags, host.site_archs)
    preset = dict(host.preset or {})
    # one device pass per job unless the user asked for more: MAX_JOBS then spreads the passes
    # over the cores, and each job's memory is one pass's (job_ram_gb)
    threads = {kernel.threads_variable: "1"} if kernel.threads_variable else {}
    passes = device_passes(preset.get(kernel.threads_variable or ""), len(archs))
    jobs, jobs_why = choose_max_jobs(host.resources, kernel.job_ram_gb * passes)
    if "MAX_JOBS" in preset:
        jobs, jobs_why = int(preset["MAX_JOBS"]), "from $MAX_JOBS"
    sizing = BuildSizing(archs, arch_why, jobs, jobs_why)
    env = {"MAX_JOBS": str(jobs), **arch_variables(kernel.arch_variables, archs), **threads}
    env = {k: v for k, v in env.items() if k not in preset or k == "MAX_JOBS"}
    # an unlisted release asset may be missing when the stage runs, and then it builds
    builds = choice.source == "build" or (choice.source == "release" and choice.listed is None)
    estimate = _estimate(kernel, sizing, host) if builds else ""
    if builds and not host.writable:
        estimate += f"; wheelhouse {host.wheelhouse} is read-only for you: not published there"
    return KernelDecision(key, choice, sizing, env, estimate)


def _estimate(kernel: KernelSpec, sizing: BuildSizing, host: KernelHost) -> str:
    """'; about N min on this host' from the profile's per-architecture figure on 16 cores."""
    slow = "" if host.ninja else "; ninja is not on PATH, so the build runs one file at a time"
    if kernel.build_minutes is None:
        return slow
    archs = len(sizing.archs) or DEFAULT_ARCH_COUNT
    minutes = kernel.build_minutes * archs * 16 / max(1, min(sizing.max_jobs, host.resources.cores))
    return f"; a source build takes about {minutes:.0f} min on this host{slow}"
