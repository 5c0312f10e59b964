"""Flag groups that several commands share, declared once."""

from __future__ import annotations

import argparse

from verl_bootstrap.cli.output import path_arg

__all__ = ["config_flag", "index_flags", "json_flag", "lock_flags", "source_flags"]

CONFIG_HELP = (
    "a site config file or URL, over $VERL_BOOTSTRAP_CONFIG, ~/.config/verl-bootstrap/config.yaml "
    "and /etc/verl-bootstrap/config.yaml"
)


def source_flags(p: argparse.ArgumentParser) -> None:
    """Where verl comes from."""
    p.add_argument("--verl-source", help="verl git URL or local repo (a mirror)")
    p.add_argument("--verl-ref", help="verl tag, branch or commit (default: the profile's)")
    p.add_argument(
        "--allow-unsupported-ref",
        action="store_true",
        help="use today's stack at a ref no stack covers",
    )


def index_flags(p: argparse.ArgumentParser, *, offline_help: str) -> None:
    """Where packages come from: the backend, named indexes, conda channels, the network."""
    p.add_argument(
        "--backend", choices=["conda", "venv"], help="env backend (default: the profile's)"
    )
    p.add_argument(
        "--index",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="point a named index elsewhere (repeatable; 'default' is the default index)",
    )
    p.add_argument(
        "--channel",
        action="append",
        default=[],
        metavar="URL_OR_PATH",
        help="conda channel (repeatable)",
    )
    p.add_argument("--offline", action="store_true", help=offline_help)


def lock_flags(p: argparse.ArgumentParser) -> None:
    """Installing a lockfile instead of resolving."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--locked",
        action="store_true",
        help="install exactly the profile's lockfile (refused when the profile changed since)",
    )
    mode.add_argument(
        "--frozen", action="store_true", help="install the lockfile as it is, even if stale"
    )
    p.add_argument(
        "--lockfile",
        type=path_arg,
        metavar="PATH",
        help="the lockfile to install (implies --locked; default lockfiles/PROFILE/...)",
    )
    p.add_argument(
        "--bundle",
        type=path_arg,
        metavar="PATH",
        help="install from an offline bundle (`verl-bootstrap bundle`): no network at all",
    )


def config_flag(p: argparse.ArgumentParser) -> None:
    """--config: the site config to read."""
    p.add_argument("--config", metavar="FILE_OR_URL", help=CONFIG_HELP)


def json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document")
