"""Checks of the machine: disk, RAM for source builds, glibc, and running without root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.options import choose_backend
from verl_bootstrap.plan.doctor.inputs import Context
from verl_bootstrap.plan.doctor.results import CheckResult, fail, ok, skipped, warn
from verl_bootstrap.platforms import MACHINES
from verl_bootstrap.profile.models import Stage

__all__ = [
    "builds_from_source",
    "check_disk",
    "check_glibc",
    "check_platform",
    "check_ram",
    "check_root",
    "manylinux_glibc",
    "planned_builds",
    "wheel_machine",
]

GIB = 1024**3
# pip's cache keeps wheel archives, about a third of what they unpack to (verl's base deps:
# ~460 MB of wheels, ~1.5 GB installed); half leaves room for sdists and build trees.
PIP_SHARE = 0.5
# The conda side of an env is Python and a few libraries; the rest comes from uv.
CONDA_SHARE = 0.1
TIGHT = 1.25  # warn when free space is within 25 % of the need
# nvcc jobs for flash-attn and TransformerEngine kernels peak at several GiB each.
GIB_PER_JOB = 4
# verl's install_vllm_sglang_mcore.sh exports MAX_JOBS=32 itself, whatever the caller set.
SCRIPT_JOBS = 32
# PyTorch's Linux x86_64 wheels are manylinux_2_28 since torch 2.6.
DEFAULT_GLIBC = (2, 28)
_LEGACY_TAGS = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_DOCKER_TIMEOUT = 5.0


def builds_from_source(stage: Stage) -> bool:
    """Stages that compile: CUDA extensions built without isolation, and verl's own script."""
    return stage.no_build_isolation or stage.kind == "script"


def planned_builds(ctx: Context) -> dict[str, str]:
    """Stage id -> why it compiles: as the plan chose each kernel's source where a plan was made,
    else every stage that may compile (no plan: which source serves a kernel is not known)."""
    if ctx.inputs.source_builds is not None:
        return dict(ctx.inputs.source_builds)
    stages = ctx.profile.stages if ctx.profile else ()
    return {s.id: _may_compile(s) for s in stages if builds_from_source(s)}


def _may_compile(stage: Stage) -> str:
    if stage.kind == "script":
        return "verl's install script compiles its kernels"
    return "built against the env's torch (no build isolation; no plan says which source serves it)"


def _existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


@dataclass(frozen=True)
class Cache:
    """A package cache an install fills, and how much of the env's size it takes."""

    path: Path
    # uv and rattler unpack into their caches and hardlink from there into the env: on the
    # prefix's filesystem such a cache costs nothing beyond the env itself.
    linked: bool
    share: float  # of the profile's size, when it is not linked into the env


def _caches(ctx: Context) -> list[Cache]:
    """The caches this install will fill: uv always; rattler for conda; pip for verl's script."""
    env = ctx.environ
    home = Path(env.get("HOME") or Path.home())
    root = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    given = dict(ctx.inputs.cache_dirs)
    path = {
        name: given.get(name) or Path(env.get(variable) or root / name)
        for name, variable in (
            ("uv", "UV_CACHE_DIR"),
            ("pip", "PIP_CACHE_DIR"),
            ("rattler", "RATTLER_CACHE_DIR"),
        )
    }
    caches = [Cache(path["uv"], linked=True, share=1.0)]
    profile = ctx.profile
    backend = choose_backend(ctx.inputs.backend, profile.env if profile else None)
    if backend == "conda":
        caches.append(Cache(path["rattler"], linked=True, share=CONDA_SHARE))
    if profile and any(s.kind == "script" for s in profile.stages):
        caches.append(Cache(path["pip"], linked=False, share=PIP_SHARE))
    return caches


def _disk_needs(ctx: Context) -> dict[int, tuple[list[Path], float, Path]]:
    """Per filesystem: the paths on it, the GB they need, and a folder on it that exists."""
    size = ctx.profile.disk_gb if ctx.profile else 0.0
    wanted = [(ctx.inputs.prefix, size, False)] if ctx.inputs.prefix is not None else []
    wanted += [(c.path, size * c.share, c.linked) for c in _caches(ctx)]
    prefix_dev = None
    filesystems: dict[int, tuple[list[Path], float, Path]] = {}
    for number, (path, need, linked) in enumerate(wanted):
        existing = _existing(path)
        dev = existing.stat().st_dev
        if number == 0 and ctx.inputs.prefix is not None:
            prefix_dev = dev
        # a cache hardlinked into the env on its own filesystem needs no room beyond the env's
        counted = 0.0 if linked and dev == prefix_dev else need
        paths, total, _ = filesystems.get(dev, ([], 0.0, existing))
        filesystems[dev] = ([*paths, path], total + counted, existing)
    return filesystems


@dataclass(frozen=True)
class Space:
    """One filesystem: the paths on it, its free space and what they need, in GB."""

    paths: tuple[str, ...]
    free_gb: float
    need_gb: float


def _spaces(ctx: Context) -> list[Space]:
    return [
        Space(tuple(str(p) for p in paths), shutil.disk_usage(existing).free / GIB, need)
        for paths, need, existing in _disk_needs(ctx).values()
    ]


def check_disk(ctx: Context) -> CheckResult:
    """Free disk at the prefix and the caches against the profile's size."""
    spaces = _spaces(ctx)
    rows = [asdict(s) for s in spaces]
    fix = (
        "free space there, or put the env on a larger disk with --prefix and the caches with "
        "UV_CACHE_DIR, PIP_CACHE_DIR and RATTLER_CACHE_DIR"
    )
    if not ctx.profile:
        text = "; ".join(f"{s.free_gb:.1f} GB free for {', '.join(s.paths)}" for s in spaces)
        return ok("disk", f"{text} (no profile, so no size to compare)", filesystems=rows)
    text = "; ".join(
        f"{s.free_gb:.1f} GB free, {s.need_gb:.1f} GB needed for {', '.join(s.paths)}"
        for s in spaces
    )
    text += (
        f" (the {ctx.profile.name} env takes {ctx.profile.disk_gb:g} GB; uv's cache shares its "
        "files on the env's filesystem)"
    )
    if any(s.free_gb < s.need_gb for s in spaces):
        return fail("disk", text, fix, filesystems=rows)
    if any(s.free_gb < s.need_gb * TIGHT for s in spaces):
        return warn("disk", text + ", with little to spare", fix, filesystems=rows)
    return ok("disk", text, filesystems=rows)


def _mem_available_gib(root: Path) -> float | None:
    try:
        text = (root / "proc/meminfo").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE)
    return int(match[1]) / 1024**2 if match else None


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _jobs(stage: Stage, environ: Mapping[str, str]) -> int:
    if stage.kind == "script":
        return SCRIPT_JOBS
    value = stage.env.get("MAX_JOBS") or environ.get("MAX_JOBS") or ""
    return int(value) if value.isdigit() else _cpus() + 2  # ninja's default parallelism


def check_ram(ctx: Context) -> CheckResult:
    """RAM against the build parallelism (MAX_JOBS) of stages that build from source."""
    builds = planned_builds(ctx)
    stages = [s for s in ctx.profile.stages if s.id in builds] if ctx.profile else []
    if not stages:
        return skipped("ram", "no stage builds from source")
    available = _mem_available_gib(ctx.inputs.root)
    planned = dict(ctx.inputs.build_jobs)  # as the plan sized them, where a plan was made
    jobs = max(planned.get(s.id) or _jobs(s, ctx.environ) for s in stages)
    if available is None:
        fix = f"set MAX_JOBS to your free RAM in GiB divided by {GIB_PER_JOB}"
        unread = {"available_gib": None, "jobs": jobs, "stages": [s.id for s in stages]}
        return warn("ram", "cannot read MemAvailable from /proc/meminfo", fix, **unread)
    data = {"available_gib": round(available, 1), "jobs": jobs, "stages": [s.id for s in stages]}
    finding = f"{available:.0f} GiB available for {jobs} parallel compile jobs"
    if jobs * GIB_PER_JOB > available:
        safe = max(1, int(available // GIB_PER_JOB))
        fix = f"export MAX_JOBS={safe} before installing (about {GIB_PER_JOB} GiB per job)"
        return warn("ram", f"{finding}: a build may run out of memory", fix, **data)
    return ok("ram", finding, **data)


def manylinux_glibc(tag: str) -> tuple[int, int] | None:
    """The glibc a wheel's platform tag needs: 'manylinux_2_28_x86_64' -> (2, 28)."""
    match = re.match(r"^manylinux_(\d+)_(\d+)_", tag)
    if match:
        return int(match[1]), int(match[2])
    return _LEGACY_TAGS.get(tag.split("_", 1)[0])


def host_glibc() -> tuple[int, int] | None:
    """This host's glibc version, or None (musl, or not Linux)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        return None
    match = re.match(r"^glibc (\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


def _glibc(ctx: Context) -> tuple[int, int] | None:
    """The host's glibc: given in the inputs (a recorded report), else this host's."""
    given = ctx.inputs.glibc
    if given is None:
        return host_glibc()
    match = re.match(r"^(\d+)\.(\d+)", given)
    return (int(match[1]), int(match[2])) if match else None


def check_glibc(ctx: Context) -> CheckResult:
    """glibc against the manylinux tags of the wheels the plan installs."""
    tags = [v for t in ctx.inputs.wheel_tags if (v := manylinux_glibc(t))]
    need = max(tags) if tags else DEFAULT_GLIBC
    source = "the planned wheels" if tags else f"PyTorch's {ctx.machine} wheels (manylinux_2_28)"
    have = _glibc(ctx)
    shown = f"{need[0]}.{need[1]}"
    data = {"host": have and f"{have[0]}.{have[1]}", "required": shown, "machine": ctx.machine}
    fix = (
        f"run on a node whose OS has glibc >= {shown}, or inside a rootless container "
        f"(Apptainer) with a newer OS"
    )
    if have is None:
        return fail("glibc", f"no glibc on this host; {source} need glibc >= {shown}", fix, **data)
    if have < need:
        found = f"glibc {have[0]}.{have[1]} is older than the {shown} that {source} need"
        return fail("glibc", found, fix, **data)
    found = f"glibc {have[0]}.{have[1]} on {ctx.machine} runs {source} (need >= {shown})"
    return ok("glibc", found, **data)


def wheel_machine(tag: str) -> str | None:
    """The machine a wheel's platform tag is for ('manylinux_2_28_aarch64' -> 'aarch64'; None
    for 'any' or a tag of no Linux machine we know)."""
    return next((m for m in MACHINES.values() if tag.endswith(f"_{m}")), None)


def check_platform(ctx: Context) -> CheckResult:
    """The host's machine and wheel tags against the lockfile's platform and planned wheels."""
    machine, platform, lock = ctx.machine, ctx.platform, ctx.inputs.lock_platform
    have = _glibc(ctx)
    tags = f"manylinux_{have[0]}_{have[1]}_{machine}" if have else f"linux_{machine}"
    data: dict[str, object] = {"machine": machine, "platform": platform, "lock_platform": lock}
    data["foreign_tags"] = _foreign_tags(ctx)
    found = f"{machine} host ({platform}): it runs wheels tagged up to {tags}, and 'any'"
    problems = _platform_problems(ctx)
    if not problems:
        return ok("platform", found, **data)
    fix = (
        f"install the {platform} lockfile (lockfiles/PROFILE/VARIANT-{platform}.lock.yaml), "
        f"or lock for this host with `verl-bootstrap lock --platform {platform}`"
    )
    finding = f"{found}; {'; '.join(problems)}: they cannot load here"
    return fail("platform", finding, fix, **data)


def _foreign_tags(ctx: Context) -> list[str]:
    """The planned wheels' tags that name another machine than this host's."""
    machine = ctx.machine
    return sorted({t for t in ctx.inputs.wheel_tags if wheel_machine(t) not in (None, machine)})


def _platform_problems(ctx: Context) -> list[str]:
    """A lockfile of another platform, and planned wheels of another machine, named plainly."""
    lock = ctx.inputs.lock_platform
    problems = []
    if lock and lock != ctx.platform:
        problems.append(f"the lockfile is for {lock} ({MACHINES.get(lock, lock)} wheels)")
    foreign = _foreign_tags(ctx)
    if foreign:
        problems.append(f"planned wheels are tagged {', '.join(foreign)}")
    return problems


def _docker(environ: Mapping[str, str]) -> str:
    docker = shutil.which("docker", path=environ.get("PATH"))
    if docker is None:
        return "not installed"
    try:
        done = proc.capture(
            [docker, "info", "--format", "{{.ServerVersion}}"], timeout=_DOCKER_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired):
        return "installed, daemon not answering"
    return (
        f"usable (server {done.stdout.strip()})"
        if done.returncode == 0
        else "installed, not usable"
    )


def check_root(ctx: Context) -> CheckResult:
    """No root is needed: warn when run as root; report Docker but never require it."""
    docker = _docker(ctx.environ)
    uid = os.geteuid()
    data = {"uid": uid, "docker": docker}
    tail = f"Docker: {docker} (not needed)"
    if uid == 0:
        return warn(
            "root",
            f"running as root; {tail}",
            "run verl-bootstrap as your own user: it needs no root and never calls sudo, and an "
            "env written by root cannot be updated by anyone else",
            **data,
        )
    return ok("root", f"running as uid {uid}, no root needed; {tail}", **data)
