"""The plan's decision for each kernel stage, on either route (one `plan_kernels` for the
resolving route's `stage_queries` and a lock's `lockinstall.kernels.locked_queries`): the build key
the env is expected to have, the source that key selects (and why), and the variables that size a
source build."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from packaging.version import InvalidVersion, Version

from verl_bootstrap.kernels.host import KernelHost
from verl_bootstrap.kernels.kernelchoice import KernelQuery, choose
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
from verl_bootstrap.kernels.toolkit import toolkit_need
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.profile.models import Profile

__all__ = [
    "COMPILES",
    "KernelDecision",
    "build_minutes",
    "cxx11_abi",
    "decision",
    "expected_key",
    "for_host",
    "plan_kernels",
    "stage_queries",
]

# the sources whose install compiles: a source build, or the stage's own install of a
# distribution the index has only as an sdist
COMPILES = frozenset({"build", "stage"})
# PyPI's torch wheels use the C++11 ABI from 2.7 on (earlier ones the pre-C++11 ABI).
_CXX11_FROM = Version("2.7")


@dataclass(frozen=True)
class KernelDecision:
    """One kernel stage's plan: its expected key, chosen source, sizing and variables."""

    key: BuildKey
    choice: KernelChoice
    sizing: BuildSizing
    env: Mapping[str, str] = field(default_factory=dict)
    # of a source build, whether expected or a fallback: how long here, the toolkit it needs
    build: tuple[str, ...] = ()
    kept: str = ""  # where a build's wheel goes ("" when no build is expected)
    minutes: float | None = None  # the build's estimate on this host (None: no figure)

    def line(self) -> str:
        """What the plan says about the stage: its source and why, then an expected build's
        notes. A wheel the lockfile does not pin is a hash gap the plan names above it, and the
        stage's line says what it holds: the kernel line leaves both out."""
        choice = self.choice
        plain = choice.unpinned or choice.replaces  # said by the gaps, or by the stage's line
        said = f"kernel: {choice.plain_reason() if plain else choice.reason}"
        notes = [*self.build, self.kept] if self.kept else []
        return said + (f"\nbuild: {'; '.join(notes)}" if notes else "")

    def fallback_line(self) -> str:
        """What the plan says of the build a prebuilt stage falls back to."""
        cost = f": {'; '.join(self.build)}" if self.build else ""
        return f"its build variables apply only if it falls back to building from source{cost}"

    @property
    def compiles(self) -> bool:
        """Whether the plan expects the stage to compile: a source build, or the stage's own
        install of a distribution no prebuilt wheel serves (TransformerEngine's extension)."""
        return self.choice.source in COMPILES


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
    notes = _build_notes(kernel, key, sizing, host)
    # an unlisted release asset may be missing when the stage runs, and then it builds
    builds = choice.source in COMPILES or (choice.source == "release" and choice.listed is None)
    kept = _kept(choice, host) if builds else ""
    return KernelDecision(
        key, choice, sizing, env, notes, kept, build_minutes(kernel, sizing, host)
    )


def _build_notes(
    kernel: KernelSpec, key: BuildKey, sizing: BuildSizing, host: KernelHost
) -> tuple[str, ...]:
    """What the plan says of a source build of the stage: how long here, the toolkit."""
    notes = [_estimate(kernel, sizing, host), toolkit_need(key.cuda, host.nvcc)]
    if not host.ninja:
        notes.append("ninja is not on PATH, so the build runs one file at a time")
    return tuple(n for n in notes if n)


def _kept(choice: KernelChoice, host: KernelHost) -> str:
    """Where the wheel the build makes goes, so that later nodes skip the build."""
    house = host.wheelhouse
    if choice.source == "stage":
        return (
            "uv builds it inside the stage's install, so no wheelhouse keeps it (from the "
            "lockfile, the default route, it is built as a wheel and published)"
        )
    if not host.writable:
        return (
            f"wheelhouse {house} is read-only for you: not published there (`verl-bootstrap "
            "wheelhouse add` files it where you can write)"
        )
    if host.configured:
        return f"the wheel is published to the lab wheelhouse {house}: later nodes take it"
    return (
        f"the wheel is kept in your wheelhouse {house}: a lab's shared one (`wheelhouse:` in "
        "the site config) spares every later node this build"
    )


def build_minutes(kernel: KernelSpec, sizing: BuildSizing, host: KernelHost) -> float | None:
    """The profile's figure for 16 cores (per architecture, where the build compiles device code
    for each), spread over the jobs this host runs (None: the profile gives no figure)."""
    if kernel.build_minutes is None:
        return None
    archs = (len(sizing.archs) or DEFAULT_ARCH_COUNT) if kernel.build_per_arch else 1
    jobs = max(1, min(sizing.max_jobs, host.resources.cores))
    return kernel.build_minutes * archs * 16 / jobs


def _estimate(kernel: KernelSpec, sizing: BuildSizing, host: KernelHost) -> str:
    """'about N min on this host', and the figure it comes from."""
    minutes = build_minutes(kernel, sizing, host)
    if minutes is None:
        return ""
    known = f"{len(sizing.archs)} here" if sizing.archs else "none known here: about 4"
    per = f" per GPU architecture ({known})" if kernel.build_per_arch else ""
    measured = f"; measured: {kernel.build_measured}" if kernel.build_measured else ""
    return (
        f"about {minutes:.0f} min on this host (the profile's {kernel.build_minutes:g} min{per} "
        f"on 16 cores, at this host's MAX_JOBS{measured})"
    )
