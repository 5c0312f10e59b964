"""Command lines for the package installers: uv (default, fast, hash-checking) and pip."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.machine.host.indexes import IndexSettings

__all__ = [
    "InstallRequest",
    "build_command",
    "install_command",
    "pip_launcher",
    "uninstall_command",
    "uv_binary",
]


@dataclass(frozen=True)
class InstallRequest:
    """One `pip install` worth of work into an env's interpreter."""

    python: Path
    packages: tuple[str, ...] = ()
    editable: str | None = None  # a path, optionally with [extras]
    requirements: Path | None = None  # a hashed requirements file (--require-hashes)
    index: str | None = None  # profile index name for this stage
    no_deps: bool = False
    no_build_isolation: bool = False
    overrides_file: Path | None = None
    # the protected packages earlier stages installed, pinned (written when the stage starts)
    constraints_file: Path | None = None
    offline: bool = False
    # the locked build dependencies with their sha256 (uv: --require-build-hashes)
    build_constraints: Path | None = None


def find_uv() -> str | None:
    """The uv binary: the one our own uv package ships beside us, else one on PATH, else None."""
    from uv import find_uv_bin  # noqa: PLC0415 - uv's package locates its binary on import

    try:
        return str(find_uv_bin())
    except FileNotFoundError:  # a uv package without its binary (a source build of it)
        return shutil.which("uv")


def uv_binary() -> str:
    """The uv executable to run (a bare `uv` when none is found, so the error names it)."""
    return find_uv() or "uv"


def pip_launcher() -> list[str]:
    """How to run pip on the host for downloads: our interpreter's pip, else uv's pip."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    return [uv_binary(), "tool", "run", "pip"]


def install_command(tool: str, request: InstallRequest, settings: IndexSettings) -> list[str]:
    """The argv that performs `request` with `tool` ("uv" or "pip")."""
    if tool == "pip":
        return _pip_command(request, settings)
    return _uv_command(request, settings)


def uninstall_command(tool: str, python: Path, names: tuple[str, ...]) -> list[str]:
    """The argv that removes the distributions `names` from the env of `python`."""
    if tool == "pip":
        pip = [str(python), "-m", "pip", "uninstall", "--yes", "--disable-pip-version-check"]
        return [*pip, *names]
    return [uv_binary(), "pip", "uninstall", "--python", str(python), *names]


def _uv_command(request: InstallRequest, settings: IndexSettings) -> list[str]:
    cmd = [uv_binary(), "pip", "install", "--python", str(request.python)]
    # pip's semantics: the best version across every index, as the user's pip would pick.
    cmd += ["--index-strategy", "unsafe-best-match", "--no-sources"]
    # --default-index: uv lets a UV_DEFAULT_INDEX in the environment beat --index-url
    cmd += _index_args(
        request, settings, extra_flag="--extra-index-url", default_flag="--default-index"
    )
    if request.overrides_file:
        cmd += ["--override", str(request.overrides_file)]
    cmd += _common_flags(request) + _locked_build(request)
    return cmd + _targets(request)


def build_command(
    request: InstallRequest, settings: IndexSettings, sdist: Path, out_dir: Path
) -> list[str]:
    """uv's argv that builds `sdist` into a wheel in `out_dir`, as `request`'s stage would build it
    (its indexes for the build requirements, its build isolation, the env's interpreter)."""
    cmd = [uv_binary(), "build", "--wheel", "--out-dir", str(out_dir)]
    cmd += ["--python", str(request.python)]
    cmd += ["--index-strategy", "unsafe-best-match", "--no-sources"]
    cmd += _index_args(
        request,
        settings,
        extra_flag="--extra-index-url",
        default_flag="--default-index",
        constraint_flag="--build-constraints",
    )
    if request.no_build_isolation:
        cmd.append("--no-build-isolation")
    if request.offline:
        cmd.append("--offline")
    return [*cmd, *_locked_build(request), str(sdist)]


def _locked_build(request: InstallRequest) -> list[str]:
    """uv's flags that hash-check every build dependency against the locked ones."""
    if request.build_constraints is None:
        return []
    return ["--build-constraints", str(request.build_constraints), "--require-build-hashes"]


def _pip_command(request: InstallRequest, settings: IndexSettings) -> list[str]:
    cmd = [str(request.python), "-m", "pip", "install", "--disable-pip-version-check"]
    cmd += _index_args(
        request, settings, extra_flag="--extra-index-url", default_flag="--index-url"
    )
    if request.overrides_file:
        # pip has no overrides; constraints are the closest it offers.
        cmd += ["--constraint", str(request.overrides_file)]
    cmd += _common_flags(request)
    return cmd + _targets(request)


def _index_args(
    request: InstallRequest,
    settings: IndexSettings,
    *,
    extra_flag: str,
    default_flag: str,
    constraint_flag: str = "--constraint",
) -> list[str]:
    args: list[str] = []
    if settings.index_url:
        args += [default_flag, settings.index_url]
    stage_url = settings.url_of(request.index) if request.index else None
    if stage_url:
        args += [extra_flag, stage_url]
    for url in settings.extra_index_urls:
        args += [extra_flag, url]
    for link in settings.find_links:
        args += ["--find-links", link]
    for constraint in settings.constraints:
        args += [constraint_flag, constraint]
    return args


def _common_flags(request: InstallRequest) -> list[str]:
    flags = []
    if request.constraints_file:
        flags += ["--constraint", str(request.constraints_file)]
    if request.no_deps:
        flags.append("--no-deps")
    if request.no_build_isolation:
        flags.append("--no-build-isolation")
    if request.offline:
        flags.append("--offline")
    if request.requirements:
        flags += ["--require-hashes", "-r", str(request.requirements)]
    return flags


def _targets(request: InstallRequest) -> list[str]:
    targets = list(request.packages)
    if request.editable:
        targets = ["-e", request.editable, *targets]
    return targets
