"""`verl-bootstrap lock`: resolve a profile, CUDA variant and platform into a lockfile.

Nothing is installed and no GPU is needed: uv resolves each stage for the lock's Python and
platform, constrained by the pins of the stages before it (verl's install order), and the conda
part (conda backend only) is solved by py-rattler against the lock's virtual packages.
"""

from __future__ import annotations

import datetime
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from verl_bootstrap import __version__
from verl_bootstrap.errors import BootstrapError, InputError
from verl_bootstrap.installer.envs.condarc import channel_urls, load_condarc
from verl_bootstrap.installer.resolve import Resolved, Target
from verl_bootstrap.lock.format import (
    CudaTarget,
    Lockfile,
    channel_name,
    profile_hash,
)
from verl_bootstrap.lock.io import dump_lockfile, read_lockfile
from verl_bootstrap.lock.lockcheckout import locked_source
from verl_bootstrap.lock.making.buildlock import lock_stage_builds
from verl_bootstrap.lock.making.lockstack import lock_stack
from verl_bootstrap.lock.making.resolution import fetch_verl, resolve_stages
from verl_bootstrap.lock.making.stages import torch_cuda
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.machine.host.interpreters import minor_fits
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import atomic_write, cache_folder, default_lockfile
from verl_bootstrap.platforms import DEFAULT_GLIBC, MACHINES, locked_glibc
from verl_bootstrap.profile.load import load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.profile.variants import known_variant
from verl_bootstrap.redact import shareable
from verl_bootstrap.siteconfig.apply import index_settings

__all__ = [
    "AfterLock",
    "LockRequest",
    "LockResult",
    "load_locked_profile",
    "lock_profile",
    "normalize_cutoff",
    "verl_pyproject",
]


@dataclass(frozen=True)
class LockRequest:
    """One lockfile to make. `options.cuda` is the variant; None fields come from the old lock."""

    options: RunOptions
    platform: str = "linux-64"
    python: str | None = None
    exclude_newer: str | None = None
    output: Path | None = None
    upgrade: bool = False  # resolve afresh: no old cutoff, no version kept from the old lock
    glibc: str | None = None  # the oldest glibc of the target machines (default 2.28)
    # the lock whose Python, cutoff and backend are kept when `output` holds none yet (a new
    # lockfile in the user's folder keeps the shipped one's)
    base: Path | None = None


@dataclass(frozen=True)
class LockResult:
    """A lockfile written (or found identical)."""

    path: Path
    lock: Lockfile
    changed: bool
    notes: tuple[str, ...] = ()
    previous: Lockfile | None = None  # the lockfile it replaced (or was based on)


def load_locked_profile(options: RunOptions) -> Profile:
    """The profile a lock is made from: loaded, with the stack of the requested verl ref."""
    profile = load_profile(options.profile)
    return apply_stack(profile, options.verl_ref, allow_unsupported=options.allow_unsupported_ref)


# A step after the resolution that may add to the lock (and say what it did in the notes):
# locking.kernelwheels records the kernel stages' prebuilt wheels with it.
AfterLock = Callable[[Lockfile, Profile, Path, list[str]], Lockfile]


def lock_profile(
    request: LockRequest, *, work: Path | None = None, after: AfterLock | None = None
) -> LockResult:
    """Resolve and write one lockfile; unchanged content leaves the file untouched."""
    _check_platform(request.platform)
    base = load_profile(request.options.profile)
    own = apply_stack(base, request.options.verl_ref, allow_unsupported=True)
    variant = known_variant(own, request.options.cuda)
    path = request.output or default_lockfile(base.name, variant, request.platform)
    previous = _previous(path) or (_previous(request.base) if request.base else None)
    wanted = request.python or (previous.python if previous else None)
    at_ref, _ = lock_stack(request.options, request.platform, wanted)
    profile = at_ref.profile
    target = Target(
        python=_python(request.python or (previous.python if previous else None), profile),
        platform=request.platform,
        exclude_newer=_cutoff(request, previous),
        offline=request.options.offline,
        glibc=_glibc(request.glibc or (_old_glibc(previous))),
    )
    backend = request.options.backend_for(profile.env, previous.backend if previous else None)
    request = replace(request, options=replace(request.options, backend=backend))
    settings, notes = index_settings(profile, request.options)
    notes += [at_ref.said] if at_ref.said else []
    notes += at_ref.notes
    with tempfile.TemporaryDirectory(prefix="verl-lock-") as tmp, _logs_kept(Path(tmp)):
        lock = _resolve(
            profile,
            variant=variant,
            target=target,
            settings=settings,
            request=request,
            work=Path(work or tmp),
            kept={} if request.upgrade else _kept_versions(previous, target),
            notes=notes,
        )
        if at_ref.uv_lock is not None:  # a stack of verl's uv.lock: recorded, with its subs
            lock = lock.model_copy(update={"uv_lock": at_ref.uv_lock})
        if after is not None:  # e.g. the kernel stages' prebuilt wheels, recorded
            lock = after(lock, profile, Path(work or tmp), notes)
    built = [
        f"{d.name} {d.version}" for s in lock.stages for d in s.distributions if d.source == "sdist"
    ]
    if built:
        notes.append(
            f"no wheel for glibc {target.glibc} and Python {target.python}, so these are locked as "
            f"source builds: {', '.join(built)} (a newer --glibc may give wheels)"
        )
    text = dump_lockfile(lock)
    changed = not path.is_file() or path.read_text(encoding="utf-8") != text
    if changed:
        atomic_write(path, text)
        path.chmod(0o644)  # committed and shared: readable by all
    return LockResult(path=path, lock=lock, changed=changed, notes=tuple(notes), previous=previous)


def _resolve(
    profile: Profile,
    *,
    variant: str,
    target: Target,
    settings: IndexSettings,
    request: LockRequest,
    work: Path,
    kept: Mapping[str, str],
    notes: list[str],
) -> Lockfile:
    done = resolve_stages(
        profile, variant, target, settings, request.options, work=work, kept=kept, notes=notes
    )
    source, stages, resolved = done.source, done.stages, done.resolved
    stages = lock_stage_builds(
        stages, source.path, target, settings, cache=cache_folder(), work=work / "build"
    )
    cuda = _cuda_target(profile, variant, target, resolved)
    backend = request.options.backend_for(profile.env)  # lock_profile chose it (or the previous)
    return Lockfile(
        generated_by=f"verl-bootstrap {__version__}",
        regenerate=_regenerate(profile, variant, target, request),
        profile=profile.name,
        profile_hash=profile_hash(profile, variant),
        verl=locked_source(source),
        python=target.python,
        platform=target.platform,
        cuda=cuda,
        exclude_newer=target.exclude_newer,
        backend=backend,
        **(_conda(profile, request.options, target, cuda) if backend == "conda" else {}),
        stages=stages,
        forced=done.forced,
        allow_unsupported_ref=request.options.allow_unsupported_ref,
    )


@contextmanager
def _logs_kept(work: Path) -> Iterator[None]:
    """A failure whose words name a log in the lock's scratch folder (removed when `lock` ends)
    names a copy of its logs in the tool's cache instead, where the user can still read it."""
    try:
        yield
    except BootstrapError as exc:
        said = f"{exc.message}\n{exc.hint or ''}"
        if str(work) not in said:
            raise
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        kept = cache_folder("lock-logs", f"{stamp}-{os.getpid()}")
        for log in work.rglob("*.log"):
            shutil.copyfile(log, kept / log.name)
        exc.message = exc.message.replace(str(work), str(kept))
        exc.hint = exc.hint.replace(str(work), str(kept)) if exc.hint else exc.hint
        raise


def _previous(path: Path) -> Lockfile | None:
    """The lockfile being replaced: its Python, cutoff and backend are kept unless overridden."""
    if not path.is_file():
        return None
    try:
        return read_lockfile(path)
    except InputError:  # unreadable or an old schema: relock from the profile alone
        return None


def _kept_versions(previous: Lockfile | None, target: Target) -> dict[str, str]:
    """The versions a re-lock keeps where they still fit (uv keeps a lock's versions the same
    way): the previous lock's, when it is re-made at its own cutoff. An index can list, after a
    lock was made, files dated before its cutoff (a mirror's sync, a late upload time): a fresh
    resolution would then take them, and the regenerate line would not give the lock back."""
    if previous is None or previous.exclude_newer != target.exclude_newer:
        return {}
    return {n: d.version for n, d in previous.distributions().items() if d.source != "editable"}


def _old_glibc(previous: Lockfile | None) -> str | None:
    return locked_glibc(previous.cuda.virtual_packages) if previous else None


def _glibc(wanted: str | None) -> str:
    glibc = wanted or DEFAULT_GLIBC
    try:
        release = Version(glibc).release
    except InvalidVersion:
        release = ()
    if len(release) != 2 or release[0] != 2:
        raise InputError(f"--glibc {glibc!r} is not a glibc version (write it like 2.34)")
    return glibc


def _check_platform(platform: str) -> None:
    if platform not in MACHINES:
        raise InputError(
            f"--platform {platform}: lockfiles are made for {', '.join(sorted(MACHINES))}"
        )


def _python(wanted: str | None, profile: Profile) -> str:
    python = wanted or profile.python.prefer
    try:
        version = Version(python)
    except InvalidVersion:
        raise InputError(
            f"--python {python!r} is not a Python version (write it like 3.12)"
        ) from None
    xy = f"{version.major}.{version.minor}"
    if not minor_fits(xy, profile.python.requires):
        raise InputError(
            f"--python {xy} is outside profile {profile.name!r}'s range {profile.python.requires}"
        )
    return xy


def _cutoff(request: LockRequest, previous: Lockfile | None) -> str:
    """The upload-time cutoff: the flag, else the old lock's (re-locks match), else today."""
    if request.exclude_newer:
        return normalize_cutoff(request.exclude_newer)
    if previous is not None and previous.exclude_newer and not request.upgrade:
        return previous.exclude_newer
    today = datetime.datetime.now(datetime.timezone.utc).date()
    return f"{today.isoformat()}T00:00:00Z"


def normalize_cutoff(value: str) -> str:
    """A date or an ISO time as `YYYY-MM-DDTHH:MM:SSZ` (UTC)."""
    try:
        when = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--exclude-newer {value!r} is not a date or time",
            hint="write it like 2026-12-01 or 2026-12-01T12:00:00Z",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def verl_pyproject(profile: Profile, options: RunOptions, work: Path) -> Path:
    """verl's `pyproject.toml` at the profile's ref, from the checkout `lock` would use (its
    cache, else git, else the release sdist)."""
    settings, _ = index_settings(profile, options)
    return fetch_verl(profile, options, settings, work).path / "pyproject.toml"


def _cuda_target(
    profile: Profile, variant: str, target: Target, resolved: Sequence[Resolved]
) -> CudaTarget:
    cuda = profile.cuda_variants[variant].cuda
    torch, built_for = torch_cuda(resolved)
    if torch is not None and _cuda_xy(cuda) != built_for:
        wanted = f"CUDA {cuda}" if cuda else "a CPU build"
        got = f"a CUDA {built_for} build" if built_for else "a CPU build"
        raise InputError(
            f"variant {variant} of profile {profile.name!r} wants {wanted} of torch, but the "
            f"indexes give torch {torch} as {got} for Python {target.python}",
            hint="point the profile's index at a mirror that has the right build "
            "(--index NAME=URL), or lock for another --python-version",
        )
    virtual = {"__glibc": target.glibc}
    if cuda:
        virtual["__cuda"] = cuda
    return CudaTarget(
        variant=variant, cuda=cuda, virtual_packages=virtual, torch=torch, torch_cuda=built_for
    )


def _cuda_xy(cuda: str | None) -> str | None:
    if cuda is None:
        return None
    release = Version(cuda).release
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def _conda(
    profile: Profile, options: RunOptions, target: Target, cuda: CudaTarget
) -> dict[str, Any]:
    """The conda part: its packages (URL by channel and file name, sha256), or, where the
    channels cannot be read, no packages and the gap named (a run says so, never hides it)."""
    from verl_bootstrap.lock.making.condasolve import (  # noqa: PLC0415 - py-rattler
        ChannelsUnreachable,
        solve_conda,
    )

    channels = channel_urls(options.channels_for(profile.env), load_condarc())
    specs = [f"python {target.python}.*", *profile.env.conda_packages]
    try:
        packages = solve_conda(
            channels,
            specs,
            platform=target.platform,
            virtual={**cuda.virtual_packages, "__unix": "0", "__linux": "4.18"},
            exclude_newer=target.exclude_newer,
            cache=cache_folder(),
        )
    except ChannelsUnreachable:
        names = ", ".join(channel_name(c) for c in channels)
        gap = f"the channels ({names}) were unreachable when it was locked: {' '.join(specs)}"
        return {"conda": (), "conda_gap": gap}
    return {"conda": packages}


def _regenerate(profile: Profile, variant: str, target: Target, request: LockRequest) -> str:
    """The exact command that makes this file again."""
    options = request.options
    parts = ["verl-bootstrap", "lock", "--profile", options.profile, "--cuda", variant]
    parts += ["--platform", target.platform, "--python-version", target.python]
    parts += ["--exclude-newer", target.exclude_newer]
    if target.glibc != DEFAULT_GLIBC:
        parts += ["--glibc", target.glibc]
    if options.backend and options.backend != profile.env.backend:
        parts += ["--backend", options.backend]
    if options.verl_ref:
        parts += ["--verl-ref", options.verl_ref]
    for channel in options.channels:
        parts += ["--channel", shareable(channel)]  # the netrc gives the login, as to conda
    own = default_lockfile(Path(options.profile).stem, variant, target.platform, Path("lockfiles"))
    # lock writes there by default, named relative or whole: the line never carries this host's
    # folders for the one place every checkout has
    if request.output is not None and request.output.absolute() != own.absolute():
        parts += ["--output", str(request.output)]
    return shlex.join(parts)  # one line a shell runs as it reads; the lockfile is shared
