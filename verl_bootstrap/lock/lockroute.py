"""The route a run takes: the lockfile that fits (hash-checked, nothing resolved), else resolving.

This gathers what `lockfile.fit` decides on: the candidate lockfiles in order (the current
folder's own, where `lock` writes it; the lab's, from the site config's `lockfiles:` folder or
URL; then the profile's committed one, shipped with the tool) and what the run
needs of them (the profile's hash, variant, platform, Python, glibc, and the commit verl's ref
names now). `--resolve` skips it; `--locked`/`--lockfile` make a fitting lock a requirement.
"""

from __future__ import annotations

import platform as _platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse, urlsplit, urlunsplit

from verl_bootstrap.errors import BootstrapError, InputError
from verl_bootstrap.lock.fit import Candidate, Choice, Wanted, choose
from verl_bootstrap.lock.format import Lockfile, profile_hash
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import atomic_write, cache_folder, default_lockfile, project_lockfile
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.redact import redact

__all__ = ["Route", "choose_route", "lab_candidate", "read_line", "route_line"]

_LOCK_MAX_BYTES = 16 * 1024 * 1024  # a lab's lockfile fetched by URL: no bigger than this


@dataclass(frozen=True)
class Route:
    """The lockfile to install (None: resolve) and the one line that says why."""

    lockfile: Path | None
    origin: str  # "lab", "committed" (the chosen lockfile's), or "" when resolving
    reason: str  # why resolving ("" when a lockfile is installed)
    # a note for this folder's or the lab's lockfile when the run takes another route (whoever
    # ran `lock` here, or a lab member, expects that env: a silent fallback would hide it)
    passed_over: tuple[str, ...] = ()
    lock: Lockfile | None = None  # the chosen lockfile as read here (it is read once per run)


def choose_route(profile: Profile, options: RunOptions, variant: str) -> Route:
    """This folder's lockfile, else the lab's, else the committed one, when it fits this run of
    `variant` (the plan's choice); else resolve, and why. `profile` is the one the run installs
    (its stack applied)."""
    candidates = _candidates(profile, options, variant)
    choice = choose(candidates, _wanted(profile, options, variant, candidates))
    return _route(choice)


_PASSED = {"folder": "not this folder's lockfile", "lab": "not the lab's lockfile"}


def _route(choice: Choice) -> Route:
    passed = tuple(
        f"{_PASSED[c.origin]}: {why}" for c, why in choice.passed_over if c.origin in _PASSED
    )
    if choice.chosen is None:
        return Route(lockfile=None, origin="", reason=choice.why_resolving(), passed_over=passed)
    chosen = choice.chosen
    return Route(chosen.path, chosen.origin, reason="", passed_over=passed, lock=chosen.lock)


def _candidates(profile: Profile, options: RunOptions, variant: str) -> list[Candidate]:
    """This folder's lockfile (when it has one), the lab's (when the site names a folder), the
    committed one: the first that fits is taken, as a uv or pixi project takes its own lock."""
    platform = host_platform()
    committed = default_lockfile(profile.name, variant, platform)
    found = []
    own = project_lockfile(options.profile, variant, platform)
    if own.is_file() and own.resolve() != committed.resolve():  # in the tool's checkout: same
        found.append(_read("folder", own))
    lab = lab_candidate(options.site.lockfiles, profile.name, variant, platform)
    if lab is not None:
        found.append(lab)
    found.append(_read("committed", committed))
    return found


def lab_candidate(
    location: str | None, profile: str, variant: str, platform: str
) -> Candidate | None:
    """The lab's lockfile for this profile, variant and platform (None: the lab names no folder).

    `location` is a folder or an http(s) URL laid out as the committed lockfiles/ folder.
    """
    if not location:
        return None
    relative = default_lockfile(profile, variant, platform, root=Path())
    parts = urlsplit(location)
    if parts.scheme not in ("http", "https"):
        folder = Path(parts.path if location.startswith("file:") else location).expanduser()
        if folder.exists() and not folder.is_dir():
            raise InputError(
                f"the site config's lockfiles: {folder} is not a folder",
                hint="name the folder holding PROFILE/VARIANT-PLATFORM.lock.yaml (or an http(s) "
                "URL serving one)",
            )
        return _read("lab", folder / relative)
    # the file's path goes before any query (`?private_token=...` stays a query)
    path = parts.path.rstrip("/") + "/" + relative.as_posix()
    return _fetch_lab(urlunsplit(parts._replace(path=path, fragment="")))


def _fetch_lab(url: str) -> Candidate:
    """A lab lockfile served over http(s), copied into the user's cache (a 404: none there)."""
    from verl_bootstrap.httpclient import HttpError, fetch  # noqa: PLC0415 - only labs with a URL

    name = urlparse(url).path.strip("/").replace("/", "-")
    try:
        body = fetch(url, timeout=30, limit=_LOCK_MAX_BYTES)
    except HttpError as exc:
        shown = redact(url)
        if exc.reason == "HTTP 404":  # the lab locks no such profile, variant or platform
            return Candidate(Path(shown), "lab", None, f"no lab lockfile at {shown} ({exc})")
        why = f"cannot fetch the lab lockfile {shown} ({redact(exc.reason)}): the lab's lockfiles "
        return Candidate(Path(shown), "lab", None, why + "were not read", shown)
    # a new file renamed into a private folder: a link planted at its name is replaced, never
    # written through (a shared cache folder is refused before anything is written)
    local = cache_folder("lab-lockfiles") / name
    atomic_write(local, body)
    return _read("lab", local, redact(url))


def _read(origin: str, path: Path, shown: str | None = None) -> Candidate:
    """The candidate at `path` (`shown` as its messages name it: a fetched one by its URL)."""
    shown = shown or _shown(path)
    if not path.is_file():
        return Candidate(path, origin, None, f"no {origin} lockfile at {shown}", shown)
    try:
        return Candidate(path, origin, read_lockfile(path), label=shown)
    except BootstrapError as exc:  # a broken lab file is reported, and the next one is tried
        return Candidate(path, origin, None, f"{origin} lockfile {shown}: {exc.message}", shown)


def _wanted(
    profile: Profile, options: RunOptions, variant: str, candidates: list[Candidate]
) -> Wanted:
    ref = profile.verl.ref  # --verl-ref, as apply_stack set it
    return Wanted(
        profile=profile.name,
        profile_hash=profile_hash(profile, variant),
        variant=variant,
        platform=host_platform(),
        ref=ref,
        pythons=_pythons(profile, options, candidates),
        glibc=_glibc(),
        ref_commit=_ref_commit(profile, options, ref, candidates),
        blocker=_blocker(options),
        own_source=redact(options.verl_source) if options.verl_source else "",
        backend=options.backend_for(profile.env),
    )


def _blocker(options: RunOptions) -> str:
    if options.with_tests:
        return "--with-tests adds stages no lockfile holds"
    return ""


def _pythons(
    profile: Profile, options: RunOptions, candidates: list[Candidate]
) -> tuple[str, ...] | None:
    """The X.Y this run can build its env with, of those the candidates lock (None: any)."""
    if options.python is not None:
        return (_version_of(options.python),)
    if options.backend_for(profile.env) != "venv":
        return None  # conda brings the locked Python itself
    from verl_bootstrap.machine.host.interpreters import has_python  # noqa: PLC0415 - venv only

    locked = sorted({c.lock.python for c in candidates if c.lock is not None})
    return tuple(version for version in locked if has_python(version))


def _version_of(python: Path) -> str:
    from verl_bootstrap.machine.host.interpreters import interpreter_version  # noqa: PLC0415 - with --python only

    version = interpreter_version(python)
    return ".".join(version.split(".")[:2]) if version else "unknown"


def _glibc() -> str | None:
    libc, version = _platform.libc_ver()
    return version if libc == "glibc" and version else None


def _ref_commit(
    profile: Profile, options: RunOptions, ref: str, candidates: list[Candidate]
) -> str | None:
    """What `ref` names in the repository now: asked only when a git lock could be used."""
    if options.offline or not any(
        c.lock is not None and c.lock.verl.kind == "git" and c.lock.verl.ref == ref
        for c in candidates
    ):
        return None
    from verl_bootstrap.lock.lockcheckout import remote_commit  # noqa: PLC0415 - git locks only
    from verl_bootstrap.source.spec import git_url  # noqa: PLC0415 - as above

    return remote_commit(git_url(options.verl_source or profile.verl.repo), ref)


def route_line(
    path: Path | None, exclude_newer: str | None, reason: str, gaps: Sequence[str] = ()
) -> str:
    """The run's first line: "from lockfile … (locked …, every artifact hash-checked)", or
    "resolving: <why no lockfile fits>"; `gaps` names what is not hash-checked (lockfile.gaps
    LABELS)."""
    if path is None:
        return f"resolving: {reason}"
    when = f"locked {exclude_newer[:10]}, " if exclude_newer else ""
    named = ", ".join(dict.fromkeys(gaps))
    checked = (
        f"hash-checked but for {len(gaps)} gap(s): {named}"
        if gaps
        else "every artifact hash-checked"
    )
    return f"from lockfile {_shown(path)} ({when}{checked})"


def read_line(path: Path, exclude_newer: str | None) -> str:
    """The first line of a command that reads a lockfile without installing it (export,
    bundle): which one, by a path the user can open."""
    when = f" (locked {exclude_newer[:10]})" if exclude_newer else ""
    return f"from lockfile {_shown(path)}{when}"


def _shown(path: Path) -> str:
    """A lockfile as the user can open it from where they are: relative to the current folder
    when under it (`lockfiles/…` in a checkout), else its whole path (the tool's shipped copy
    after `uv tool install`, say), never relative to the tool's own folder."""
    whole, here = path.absolute(), Path.cwd()
    if here == Path(here.anchor):  # from / every path is "under" it: its whole path reads best
        return str(whole)
    try:
        return str(whole.relative_to(here))
    except ValueError:
        return str(whole)
