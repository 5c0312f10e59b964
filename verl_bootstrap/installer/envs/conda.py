"""Conda prefixes: made with py-rattler (no conda binary, no root), or with the user's own conda.

A prefix is created or reused, never clobbered: a folder that holds anything but a conda prefix
(or our own `.verl-bootstrap/` state) is refused.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from rattler import (
    Channel,
    Gateway,
    MatchSpec,
    Platform,
    PrefixRecord,
    RepoDataRecord,
    VirtualPackage,
    install,
    solve,
)
from rattler.exceptions import (
    CacheDirError,
    DetectVirtualPackageError,
    ExtractError,
    GatewayError,
    InstallerError,
    InvalidMatchSpecError,
    IoError,
    LinkError,
    SolverError,
    TransactionError,
)

from verl_bootstrap import paths, proc
from verl_bootstrap.errors import CommandFailed, InputError, StepFailed
from verl_bootstrap.events import emit
from verl_bootstrap.installer.envs.base import EnvBackend, EnvRequest, env_python
from verl_bootstrap.installer.envs.condahash import check_local_archives, check_locked_digests
from verl_bootstrap.installer.envs.condarc import CondaSettings, channel_urls, load_condarc
from verl_bootstrap.paths import STATE_DIRNAME
from verl_bootstrap.redact import redact

__all__ = [
    "CondaBackend",
    "ExternalCondaBackend",
    "check_target",
    "prefix_matches",
    "python_spec",
    "read_prefix",
    "seed_pip",
    "validate_request",
]

_REASON_LINES = 15  # of the solver's explanation shown in the error; the rest is elided
# What py-rattler raises while fetching, extracting and linking packages into a prefix.
_INSTALL_ERRORS = (
    CacheDirError,
    DetectVirtualPackageError,
    ExtractError,
    InstallerError,
    IoError,
    LinkError,
    TransactionError,
)


def python_spec(requires: str) -> str:
    """The conda match spec for a PEP 440 python range (">=3.10,<3.13" -> "python>=3.10,<3.13")."""
    clauses = requires.replace(" ", "")
    try:
        SpecifierSet(clauses)
    except InvalidSpecifier as exc:
        raise InputError(f"invalid python range {requires!r}: {exc}") from exc
    if "===" in clauses:
        raise InputError(f"python range {requires!r}: conda has no '===' operator")
    return f"python{clauses}" if clauses else "python"


def validate_request(request: EnvRequest) -> None:
    """Check the request's python range, preferred version and package specs before any work."""
    python_spec(request.python_requires)
    if request.python_prefer:
        try:
            Version(request.python_prefer)
        except InvalidVersion as exc:
            raise InputError(f"invalid preferred python {request.python_prefer!r}") from exc
    for spec in request.conda_packages:
        try:
            MatchSpec(spec)
        except InvalidMatchSpecError as exc:
            raise InputError(f"invalid conda package spec {spec!r}: {exc}") from exc


class CondaBackend(EnvBackend):
    """A conda prefix solved and installed by py-rattler from the request's channels."""

    name = "conda"

    def __init__(
        self, *, cache_root: Path | None = None, settings: CondaSettings | None = None
    ) -> None:
        """`cache_root` holds conda-pkgs/ and conda-repodata/; `settings` default to .condarc."""
        self._cache_root = cache_root  # None: the user's cache, checked private when used
        self._settings = settings

    def describe(self, request: EnvRequest) -> list[str]:
        """A conda-like command line saying what `create` solves and installs."""
        argv = ["rattler-create", "-p", str(request.prefix)]
        for url in channel_urls(request.channels, self._conda_settings()):
            argv += ["-c", redact(url)]
        return [*argv, python_spec(request.python_requires), *request.conda_packages]

    def create(self, request: EnvRequest) -> bool:
        """Create the prefix (or bring it up to the request); False when it already matched."""
        validate_request(request)
        check_target(request.prefix)
        installed = read_prefix(request.prefix)
        changed = False
        if installed and request.locked_conda is not None:
            check_locked_digests(
                installed, request.locked_conda, where=f"the conda env at {request.prefix}"
            )
        if not prefix_matches(request, installed):
            channels = self._channels(request)
            cache = self._cache_root or paths.cache_folder()
            _install_prefix(request, channels, installed, cache)
            changed = True
        else:
            _note(request, f"reused conda env at {request.prefix}", kind=("env", "reuse"))
        if request.seed_pip:
            changed = seed_pip(request) or changed
        return changed

    def _conda_settings(self) -> CondaSettings:
        return self._settings if self._settings is not None else load_condarc()

    def _channels(self, request: EnvRequest) -> tuple[str, ...]:
        urls = channel_urls(request.channels, self._conda_settings())
        for url in urls:
            _check_local_channel(url)
        return urls


class ExternalCondaBackend(EnvBackend):
    """A conda prefix made by the user's own micromamba, mamba or conda executable."""

    name = "conda-exe"

    def __init__(self, conda_exe: Path | str) -> None:
        """`conda_exe` is the executable (a path, or a name looked up on PATH)."""
        self._exe = Path(conda_exe)

    def describe(self, request: EnvRequest) -> list[str]:
        """The `create` command line this backend runs."""
        return self._argv(request, python_spec(request.python_requires))

    def create(self, request: EnvRequest) -> bool:
        """Run `<exe> create`, preferring `python_prefer`; False when the prefix already matched."""
        validate_request(request)
        check_target(request.prefix)
        if prefix_matches(request, read_prefix(request.prefix)):
            _note(request, f"reused conda env at {request.prefix}", kind=("env", "reuse"))
            return bool(request.seed_pip and seed_pip(request))
        if shutil.which(str(self._exe)) is None:
            raise InputError(
                f"conda executable {self._exe} was not found",
                hint="give the path of micromamba, mamba or conda, or use the built-in backend",
            )
        self._run_create(request)
        if request.seed_pip:
            seed_pip(request)
        _note(request, f"created conda env at {request.prefix}", kind=("env", "create"))
        return True

    def _run_create(self, request: EnvRequest) -> None:
        spec = python_spec(request.python_requires)
        if request.python_prefer:
            try:
                proc.run(self._argv(request, _preferring(spec, request)), log_path=request.log_path)
            except CommandFailed:
                pass  # the preferred version is not available: fall back to the range below
            else:
                return
        proc.run(self._argv(request, spec), log_path=request.log_path)

    def _argv(self, request: EnvRequest, python: str) -> list[str]:
        argv = [str(self._exe), "create", "-y", "-p", str(request.prefix)]
        if request.channels:
            argv.append("--override-channels")
        for channel in request.channels:
            argv += ["-c", channel]
        extra = ("pip",) if request.seed_pip else ()
        return [*argv, python, *request.conda_packages, *extra]


def check_target(prefix: Path) -> None:
    """Refuse a prefix that exists and holds something other than a conda prefix or our state."""
    if not prefix.exists() or (prefix / "conda-meta").is_dir():
        return
    if not prefix.is_dir():
        raise InputError(f"env prefix {prefix} exists and is not a folder")
    foreign = sorted(
        p.name for p in prefix.iterdir() if p.name != STATE_DIRNAME
    )  # our bookkeeping may come first
    if foreign:
        what = "a venv" if "pyvenv.cfg" in foreign else f"not a conda prefix ({foreign[0]}, …)"
        raise InputError(
            f"refusing to create a conda env in {prefix}: it is not empty and is {what}",
            hint="choose another prefix, or move that folder away yourself",
        )


def read_prefix(prefix: Path) -> list[PrefixRecord]:
    """The packages recorded in `prefix/conda-meta` (none for a missing prefix)."""
    meta = prefix / "conda-meta"
    if not meta.is_dir():
        return []
    return [_read_record(path) for path in sorted(meta.glob("*.json"))]


def prefix_matches(request: EnvRequest, installed: Sequence[PrefixRecord]) -> bool:
    """The prefix has a python in the requested range and every requested conda package."""
    if not env_python(request.prefix).exists():
        return False
    pythons = [r for r in installed if r.name.normalized == "python"]
    if not pythons or not _in_range(str(pythons[0].version), request.python_requires):
        return False
    return all(
        any(MatchSpec(spec).matches(record) for record in installed)
        for spec in request.conda_packages
    )


def seed_pip(request: EnvRequest) -> bool:
    """Make sure pip is importable in the env (ensurepip); True when it had to be installed."""
    python = str(env_python(request.prefix))
    if proc.capture([python, "-c", "import pip"], timeout=60).returncode == 0:
        return False
    proc.run([python, "-m", "ensurepip"], log_path=request.log_path)
    _note(request, f"seeded pip into {request.prefix} with ensurepip", kind=("env", "pip"))
    return True


def _in_range(version: str, requires: str) -> bool:
    try:
        return SpecifierSet(requires).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _read_record(path: Path) -> PrefixRecord:
    try:
        return PrefixRecord.from_path(path)
    except IoError as exc:
        raise InputError(
            f"conda prefix record {path} is unreadable: {exc}",
            hint="repair or remove that conda env yourself; it is left untouched",
        ) from exc


def _preferring(spec: str, request: EnvRequest) -> str:
    prefer = f"{request.python_prefer}.*"
    return f"{spec},{prefer}" if spec != "python" else f"python {prefer}"


def _check_local_channel(url: str) -> None:
    if not url.startswith("file://"):
        return
    folder = Path(unquote(urlparse(url).path))
    if not folder.is_dir():
        raise InputError(f"conda channel folder {folder} does not exist")
    if not (folder / "noarch" / "repodata.json").is_file():
        raise InputError(
            f"{folder} is not a conda channel (it has no noarch/repodata.json)",
            hint="index it first (rattler-index, or `conda index`)",
        )


def _install_prefix(
    request: EnvRequest, channels: tuple[str, ...], installed: list[PrefixRecord], cache: Path
) -> None:
    try:
        records, specs = asyncio.run(_solve_and_install(request, channels, installed, cache))
    except _INSTALL_ERRORS as exc:
        raise StepFailed(
            f"installing conda packages into {request.prefix} failed: {redact(str(exc))}",
            hint=f"check free disk space and write access to {request.prefix} and {cache}",
        ) from exc
    python = next((r for r in records if r.name.normalized == "python"), None)
    summary = f"python {python.version}" if python else "no python"
    lines = [f"channels: {' '.join(redact(c) for c in channels)}", f"solved: {' '.join(specs)}"]
    lines += [
        f"installed: {r.name.normalized} {r.version} {r.build} {redact(r.url)}" for r in records
    ]
    message = f"created conda env at {request.prefix} ({summary}, {len(records)} packages)"
    _note(request, message, kind=("env", "create"), lines=lines)


async def _solve_and_install(
    request: EnvRequest, channels: tuple[str, ...], installed: list[PrefixRecord], cache: Path
) -> tuple[list[RepoDataRecord], list[str]]:
    records, specs = await _solve(request, channels, installed, cache)
    if request.locked_conda is not None:
        check_locked_digests(records, request.locked_conda, where=f"the solve for {request.prefix}")
        check_local_archives(records)
    await install(
        records,
        target_prefix=request.prefix,
        cache_dir=cache / "conda-pkgs",
        installed_packages=installed,
        # A recorded python whose interpreter has gone missing is put back rather than trusted.
        reinstall_packages=set() if env_python(request.prefix).exists() else {"python"},
        # requested_specs is left out: py-rattler 0.28 passes its MatchSpec wrappers through
        # unconverted and fails with a TypeError. Our log records what was asked instead.
        show_progress=False,
    )
    return records, specs


async def _solve(
    request: EnvRequest, channels: tuple[str, ...], installed: list[PrefixRecord], cache: Path
) -> tuple[list[RepoDataRecord], list[str]]:
    """Solve with the preferred python first, then with the whole range; return what solved."""
    gateway = Gateway(cache_dir=cache / "conda-repodata")
    sources = [Channel(url) for url in channels]
    platforms = [Platform.current(), Platform("noarch")]
    virtual = VirtualPackage.detect()
    attempts = [True, False] if request.python_prefer else [False]
    failure: SolverError | None = None
    for preferred in attempts:
        specs = _specs(request, preferred=preferred)
        try:
            records = await solve(
                sources,
                specs,
                gateway=gateway,
                platforms=platforms,
                locked_packages=installed,
                virtual_packages=virtual,
            )
        except SolverError as exc:
            failure = exc
        except GatewayError as exc:
            raise _channel_failure(channels, exc) from exc
        else:
            return records, specs
    raise _solve_failure(request, channels, failure)


def _specs(request: EnvRequest, *, preferred: bool) -> list[str]:
    python = python_spec(request.python_requires)
    if preferred:
        python = _preferring(python, request)
    return [python, *request.conda_packages]


def _channel_failure(channels: Sequence[str], exc: Exception) -> StepFailed:
    shown = ", ".join(redact(c) for c in channels)
    return StepFailed(
        f"could not read the conda channels {shown}: {redact(str(exc).splitlines()[0])}",
        hint="check the channel names and URLs, your network or proxy, and channel_alias "
        "in .condarc",
    )


def _solve_failure(
    request: EnvRequest, channels: Sequence[str], exc: SolverError | None
) -> StepFailed:
    wanted = " ".join(_specs(request, preferred=False))
    shown = ", ".join(redact(c) for c in channels)
    reason = str(exc).strip().splitlines() if exc else ["no solution"]
    if len(reason) > _REASON_LINES:
        reason = [*reason[:_REASON_LINES], "…"]
    return StepFailed(
        f"no conda packages satisfy {wanted} (python {request.python_requires}) "
        f"in channels {shown}: " + "\n".join(reason),
        hint="widen the python range, or add a channel that has these packages",
    )


def _note(
    request: EnvRequest, message: str, *, kind: tuple[str, ...], lines: Sequence[str] = ()
) -> None:
    emit(message, kind=kind, prefix=str(request.prefix))
    if request.log_path is None:
        return
    request.log_path.parent.mkdir(parents=True, exist_ok=True)
    with request.log_path.open("a", encoding="utf-8") as log:
        log.writelines(f"{line}\n" for line in (message, *lines))
