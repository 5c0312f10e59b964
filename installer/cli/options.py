"""The one options builder: every command turns its flags and the site config into RunOptions here.

Flags win over the site config; a command that lacks a flag gets RunOptions' default for it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from installer.errors import InputError
from installer.options import RunOptions
from installer.paths import default_prefix

__all__ = ["profile_stem", "run_options"]


def profile_stem(profile: str) -> str:
    """The env's name for a profile given by name or by file (`lab/fsdp.yaml` -> `fsdp`)."""
    return profile.rsplit("/", 1)[-1].removesuffix(".yaml").removesuffix(".yml")


def run_options(ns: argparse.Namespace, **fixed: Any) -> RunOptions:
    """RunOptions from `ns` over the site config's settings; `fixed` fields are the command's own
    (lock resolves into a scratch prefix, for one variant)."""
    from installer.host.indexes import parse_index_flags
    from installer.siteconfig import load_site, named_indexes, site_options
    from installer.siteconfig.files import local_profile, site_lockfile

    flag = vars(ns).get
    site = load_site(flag("config"))
    profile = fixed.pop("profile", None) or flag("profile")
    profile = profile or local_profile(site.config.defaults.profile or "", os.environ)
    if not profile:
        raise InputError(
            "no --profile given, and no site config names a default profile",
            hint="pass --profile NAME (see `verl-bootstrap profiles list`)",
        )
    envs_dir = site.config.defaults.envs_dir
    name = profile_stem(profile)
    prefix = flag("prefix") or (Path(envs_dir) / name if envs_dir else default_prefix(name))
    indexes = {**named_indexes(site.config), **parse_index_flags(tuple(flag("index") or ()))}
    locked, frozen = bool(flag("locked")), bool(flag("frozen"))
    lockfile = flag("lockfile")
    if lockfile is None and (locked or frozen):
        lockfile = site_lockfile(site, os.environ)  # the lab's lockfile, when it names one
    chosen: dict[str, Any] = {
        "profile": profile,
        "prefix": Path(prefix).absolute(),
        "backend": flag("backend"),
        "verl_source": flag("verl_source"),
        "verl_ref": flag("verl_ref"),
        "cuda": flag("cuda") or "auto",
        "indexes": tuple(indexes.items()),
        "channels": tuple(flag("channel") or ()),
        "installer": flag("installer") or "uv",
        "python": flag("python"),
        "conda_exe": flag("conda_exe"),
        "skip_checks": tuple(flag("skip_check") or ()),
        "require_gpu": bool(flag("require_gpu")),
        "allow_unsupported_ref": bool(flag("allow_unsupported_ref")),
        "guard_wait": flag("wait") or 0.0,
        "offline": bool(flag("offline")),
        "site": site_options(site),
        "locked": locked,
        "frozen": frozen,
        "lockfile": lockfile,
    }
    return RunOptions(**{**chosen, **fixed})
