"""The run's options, built once by the CLI and passed explicitly (no globals)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunOptions", "SiteOptions"]


@dataclass(frozen=True)
class SiteOptions:
    """What the site config adds to a run (its named indexes travel in RunOptions.indexes).

    Each index field replaces pip's own setting of that name when set (None keeps pip's).
    """

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] | None = None
    find_links: tuple[str, ...] | None = None
    pytorch: tuple[tuple[str, str], ...] = ()  # (CUDA variant, URL of its PyTorch wheel index)
    environment: tuple[tuple[str, str | None], ...] = ()  # for every backend; None unsets
    notes: tuple[str, ...] = ()
    origin: str = ""  # the config file(s) these came from
    wheelhouse: str | None = None  # the lab wheelhouse folder (None: the tool home's)
    cuda_arch: tuple[str, ...] = ()  # archs a source build uses when no GPU is seen


@dataclass(frozen=True)
class RunOptions:
    """What the user asked for on the command line (after defaults)."""

    profile: str
    prefix: Path
    backend: str | None = None  # conda | venv; None: the profile's
    verl_source: str | None = None
    verl_ref: str | None = None
    cuda: str = "auto"
    indexes: tuple[tuple[str, str], ...] = ()  # (name, url) from --index and the site config
    channels: tuple[str, ...] = ()
    installer: str = "uv"
    python: Path | None = None  # an interpreter to build the venv from
    conda_exe: str | None = None
    skip_checks: tuple[str, ...] = ()
    require_gpu: bool = False
    allow_unsupported_ref: bool = False
    guard_wait: float = 0.0
    offline: bool = False
    with_tests: bool = False  # also install the stages marked `option: tests` (verl's test tools)
    site: SiteOptions = SiteOptions()  # from the site config; CLI flags override it
    locked: bool = False  # install exactly a lockfile whose profile hash matches the profile
    frozen: bool = False  # install a lockfile as it is (no profile-hash check)
    lockfile: Path | None = None  # the lockfile (default: lockfiles/PROFILE/VARIANT-PLATFORM)
    cuda_arch: tuple[str, ...] = ()  # --cuda-arch: the archs a kernel source build compiles for
    config: str | None = None  # the site config passed with --config (a file or a URL)
