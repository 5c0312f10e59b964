"""`update --prefix P`: re-resolve the env's profile for a newer stack, show the version diff, and
apply it (with --yes or a yes at a prompt) as a --locked install of the fresh lock."""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import dry_run_flag, env_flag, json_flag, yes_flag
from verl_bootstrap.cli.output import emit_json, err, out, seconds_arg
from verl_bootstrap.errors import EXIT_OK, Refused

if TYPE_CHECKING:
    from verl_bootstrap.options import RunOptions
    from verl_bootstrap.run.state.update import Update

__all__ = ["cmd_update", "flags_update"]


def flags_update(update: argparse.ArgumentParser) -> None:
    """update's flags."""
    env_flag(update)
    dry_run_flag(update, "show the version diff and stop")
    yes_flag(update, "apply it without asking")
    update.add_argument(
        "--wait",
        type=seconds_arg,
        default=0.0,
        metavar="SECONDS",
        help="wait for another run's lock",
    )
    json_flag(update)


def cmd_update(ns: argparse.Namespace) -> int:
    """Resolve, show, ask, apply."""
    from verl_bootstrap.cli.optionsbuilder import chosen_env, run_options
    from verl_bootstrap.run.state.update import require_record, resolve_update
    from verl_bootstrap.siteconfig.apply import applied_environment

    prefix = chosen_env(ns, command="update")
    require_record(prefix)
    options = run_options(argparse.Namespace(prefix=prefix, wait=ns.wait))
    from verl_bootstrap.cli.render import Console

    with (
        tempfile.TemporaryDirectory(prefix="verl-update-") as work,
        applied_environment(dict(options.site.environment)),
        Console(quiet=ns.json) as console,
        console.activity("update", f"resolving {options.profile} for today's stack"),
    ):
        update = resolve_update(options, Path(work))
    # applied, the install's own JSON report is the output
    _show(update, json_mode=ns.json and (ns.dry_run or not update.changes))
    if not update.changes or ns.dry_run:
        return EXIT_OK
    from verl_bootstrap.cli.confirm import confirm

    if not ns.yes:
        hint = f"apply it with: verl-bootstrap update --prefix {update.prefix} --yes"
        confirm("apply this update? [y/N] ", f"{update.prefix} was not changed", hint)
    return _apply(ns, update, options)


def _show(update: Update, *, json_mode: bool) -> None:
    if json_mode:
        changes = [{"name": c.name, "old": c.old, "new": c.new} for c in update.changes]
        emit_json(
            {"schema": "verl-bootstrap.update/1", "prefix": str(update.prefix), "changes": changes}
        )
        return
    if not update.changes:
        out(f"{update.prefix} is up to date: re-resolving its profile changes no version")
        return
    err(f"update of {update.prefix} ({len(update.changes)} change(s)):")
    for change in update.changes:
        err(f"  {change.line()}")


def _apply(ns: argparse.Namespace, update: Update, options: RunOptions) -> int:
    """A --locked install of the fresh lock onto the same prefix (confirmed above). A change the
    env cannot take in place (another Python) is refused there, and the staged lock goes."""
    from verl_bootstrap.cli.commands.install import install_with
    from verl_bootstrap.run.state.update import stage_update

    lockfile = stage_update(update)
    locked = replace(options, locked=True, frozen=False, lockfile=lockfile)
    run = argparse.Namespace(dry_run=False, yes=True, json=ns.json, force=[], no_preflight=False)
    try:
        return install_with(run, locked)
    except Refused:
        lockfile.unlink(missing_ok=True)
        raise
