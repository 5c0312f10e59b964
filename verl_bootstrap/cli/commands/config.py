"""`config show`: the site config's effective settings (mirrors, proxies, caches, defaults) and
where each came from. The site config sits under every command-line flag (run_options merges it)."""

from __future__ import annotations

import argparse
import os

from verl_bootstrap.cli.flags import config_flag, json_flag
from verl_bootstrap.cli.output import emit_json, out
from verl_bootstrap.errors import EXIT_OK

__all__ = ["cmd_show", "flags_show"]


def flags_show(show: argparse.ArgumentParser) -> None:
    """config show."""
    config_flag(show)
    json_flag(show)


def cmd_show(ns: argparse.Namespace) -> int:
    """`config show`: every effective setting and its source, secrets redacted."""
    from verl_bootstrap.siteconfig.effective import effective_settings
    from verl_bootstrap.siteconfig.show import show_text

    body = effective_settings(ns.config, os.environ)
    emit_json(body) if ns.json else out(show_text(body))
    return EXIT_OK
