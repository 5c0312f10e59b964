"""The argparse declarations of the core subcommands (no logic: handlers live in cli.install);
each feature module registers its own."""

from __future__ import annotations

import argparse
import importlib

from verl_bootstrap.cli.flags import index_flags, json_flag, lock_flags, source_flags
from verl_bootstrap.cli.output import path_arg

__all__ = ["FEATURE_MODULES", "add_commands"]

# Each feature's subcommands live in their own module with a `register(subparsers)` function.
FEATURE_MODULES = (
    "verl_bootstrap.cli.doctor",
    "verl_bootstrap.cli.lock",
    "verl_bootstrap.cli.site",
    "verl_bootstrap.cli.cluster",
    "verl_bootstrap.cli.wheelhouse",
    "verl_bootstrap.cli.envs",
    "verl_bootstrap.cli.update",
    "verl_bootstrap.cli.verltests",
    "verl_bootstrap.cli.bundle",
)


def _install_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        help="a shipped profile name or a YAML file (default: the one --prefix was made with)",
    )
    p.add_argument(
        "--prefix",
        type=path_arg,
        help="where the env goes (default ~/.verl-bootstrap/envs/PROFILE)",
    )
    p.add_argument("--conda-exe", help="use this conda/mamba/micromamba instead of py-rattler")
    source_flags(p)
    p.add_argument("--cuda", help="auto | cpu | cuXYZ (default auto: from the driver)")
    index_flags(p, offline_help="install only from caches and local paths")
    p.add_argument("--installer", choices=["uv", "pip"], help="package installer (default uv)")
    p.add_argument("--python", type=path_arg, help="base interpreter for the venv backend")
    p.add_argument(
        "--skip-check",
        action="append",
        default=[],
        metavar="NAME",
        help="override one preflight check (recorded in the lockfile)",
    )
    p.add_argument(
        "--require-gpu",
        action="store_true",
        help="fail verification when no GPU smoke test can run",
    )
    p.add_argument(
        "--cuda-arch",
        action="append",
        default=[],
        metavar="CC",
        help="GPU architecture a kernel source build compiles for, e.g. 9.0 (repeatable; "
        "default: the GPUs seen here, else the site config's)",
    )
    p.add_argument(
        "--with-tests",
        action="store_true",
        help="also install what verl's own test suite needs (the profile's test stages)",
    )
    lock_flags(p)
    json_flag(p)


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Register the subcommands on `parser`."""
    from verl_bootstrap.cli import install as clicmd

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    install = sub.add_parser("install", help="build and verify an env (the default command)")
    _install_flags(install)
    install.add_argument("--dry-run", action="store_true", help="show the plan and stop")
    install.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="apply a change to an existing env without asking (shown first either way)",
    )
    install.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STEP",
        help="re-run a step even if up to date",
    )
    install.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for another run's prefix lock",
    )
    install.add_argument(
        "--no-preflight", action="store_true", help="skip doctor's preflight checks"
    )
    install.set_defaults(handler=clicmd.cmd_install)

    plan = sub.add_parser("plan", help="print the step graph; run nothing")
    _install_flags(plan)
    plan.set_defaults(handler=clicmd.cmd_plan)

    verify = sub.add_parser("verify", help="check an existing env")
    verify.add_argument("--prefix", type=path_arg, required=True)
    verify.add_argument("--profile", help="profile whose checks to run (default: the env's own)")
    verify.add_argument("--require-gpu", action="store_true")
    verify.add_argument(
        "--against",
        type=path_arg,
        metavar="LOCKFILE",
        help="list every difference between the env and this lockfile (non-zero on any)",
    )
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(handler=clicmd.cmd_verify)

    profiles = sub.add_parser("profiles", help="list, show or validate profiles")
    psub = profiles.add_subparsers(dest="action", required=True, metavar="ACTION")
    psub.add_parser("list", help="shipped profiles").set_defaults(handler=clicmd.cmd_profiles_list)
    show = psub.add_parser("show", help="a profile with inheritance resolved")
    show.add_argument("name")
    show.add_argument("--verl-ref", help="show the stack this verl ref gets")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=clicmd.cmd_profiles_show)
    validate = psub.add_parser("validate", help="check a profile file")
    validate.add_argument("file", type=path_arg)
    validate.set_defaults(handler=clicmd.cmd_profiles_validate)

    for name in FEATURE_MODULES:
        importlib.import_module(name).register(sub)
