"""What the commands that read a lockfile share (`export`, `bundle`; `lock` for its flags): the
lockfile named by --lockfile or --profile, and the run options of a scratch prefix (the user's
indexes and channels for the lock are lockfile.origins')."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import INDEX_OPTIONS, SOURCE_OPTIONS, json_flag, option_flags
from verl_bootstrap.cli.options import run_options
from verl_bootstrap.errors import InputError

if TYPE_CHECKING:
    from verl_bootstrap.lockfile.model import Lockfile
    from verl_bootstrap.options import RunOptions

__all__ = ["lock_source_flags", "named_lock", "scratch_options"]


def lock_source_flags(p: argparse.ArgumentParser) -> None:
    """Where a lock's packages and verl come from, and --json."""
    option_flags(
        p, (*INDEX_OPTIONS, *SOURCE_OPTIONS), helps={"offline": "resolve from uv's cache only"}
    )
    json_flag(p)


def scratch_options(ns: argparse.Namespace, profile: str, cuda: str) -> RunOptions:
    """The run options of a command that installs nothing (its prefix is a scratch folder)."""
    scratch = Path(tempfile.gettempdir()) / "verl-bootstrap-lock"  # nothing is installed there
    return run_options(ns, profile=profile, cuda=cuda, prefix=scratch)


def named_lock(ns: argparse.Namespace) -> tuple[Lockfile, Path]:
    """The lockfile --lockfile names, else the committed one of --profile/--cuda/--platform."""
    from verl_bootstrap.lockfile import read_lockfile
    from verl_bootstrap.paths import default_lockfile

    if ns.lockfile is not None:
        return read_lockfile(ns.lockfile), ns.lockfile
    if not ns.profile:
        raise InputError(f"{ns.command}: pass --lockfile PATH or --profile NAME")
    variant = ns.cuda or _locked_variant(ns.profile, ns.platform)
    path = default_lockfile(ns.profile, variant, ns.platform)
    if not path.is_file():
        raise InputError(
            f"no lockfile at {path}",
            hint=f"make it with `verl-bootstrap lock --profile {ns.profile} --cuda {variant} "
            f"--platform {ns.platform}`",
        )
    return read_lockfile(path), path


def _locked_variant(profile_name: str, platform: str) -> str:
    """The profile's first CUDA variant that has a committed lockfile for `platform` (said on
    stderr when there is a choice); InputError naming the variants when none has one."""
    from verl_bootstrap.cli.output import err
    from verl_bootstrap.paths import default_lockfile
    from verl_bootstrap.profile import load_profile

    variants = list(load_profile(profile_name).cuda_variants)
    locked = [v for v in variants if default_lockfile(profile_name, v, platform).is_file()]
    if not locked:
        raise InputError(
            f"profile {profile_name!r} has no committed lockfile for {platform} "
            f"(its variants: {', '.join(variants)})",
            hint=f"make one with `verl-bootstrap lock --profile {profile_name} --cuda "
            f"{variants[0]} --platform {platform}`",
        )
    if len(locked) > 1:
        err(
            f"note: the {locked[0]} lockfile of {profile_name} (--cuda chooses among "
            f"{', '.join(locked)})"
        )
    return locked[0]
