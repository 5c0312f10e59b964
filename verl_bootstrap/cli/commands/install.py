"""`install` (the default command): build options, plan, confirm a change, run, summarize."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import dry_run_flag, install_option_flags, yes_flag
from verl_bootstrap.cli.output import emit_json, err, out, paint
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED

if TYPE_CHECKING:
    from verl_bootstrap.lock.bundle.bundleinstall import OpenedBundle
    from verl_bootstrap.options import RunOptions
    from verl_bootstrap.run.state.state import State

__all__ = ["cmd_install", "flags_install", "install_with", "opened_line"]


def flags_install(p: argparse.ArgumentParser) -> None:
    """install: the plan's flags, and how the run behaves."""
    group = install_option_flags(p, "install")
    dry_run_flag(group, "show the plan and stop")
    yes_flag(group, "apply a change to an existing env without asking (shown first either way)")
    group.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STEP",
        help="re-run a step even if up to date",
    )
    group.add_argument("--no-preflight", action="store_true", help="skip doctor's preflight checks")


def cmd_install(ns: argparse.Namespace) -> int:
    """The main job."""
    from verl_bootstrap.cli.optionsbuilder import options_and_state

    options, state = options_and_state(ns)  # a --bundle is opened by the plan, not here
    return install_with(ns, options, state)


def install_with(ns: argparse.Namespace, options: RunOptions, state: State | None = None) -> int:
    """Plan, then run (or show, with --dry-run) the install `options` describe; `state`: the
    env's state as read for the options (read once, passed on)."""
    from verl_bootstrap.cli.planview import plan_json, plan_text, report_json, summary_text
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.events import listening
    from verl_bootstrap.paths import state_file
    from verl_bootstrap.plan.choices import Bundle
    from verl_bootstrap.run.installrun import prepare_plan, run_install
    from verl_bootstrap.siteconfig.apply import applied_environment

    archive = vars(ns).get("bundle")  # from an offline bundle: checked, then unpacked
    with applied_environment(dict(options.site.environment)):
        plan = prepare_plan(options, bundle=None if archive is None else Bundle(archive))
        if plan.opened is not None:
            err(opened_line(plan.opened, kept=True))
        if ns.dry_run:
            emit_json(plan_json(plan)) if ns.json else out(plan_text(plan))
            return EXIT_OK
        err(plan.route)  # the run's first line: the lockfile it installs, or why it resolves
        from verl_bootstrap.cli.confirm import confirm_changes

        if state is not None and state.path != state_file(plan.prefix):
            state = None  # not this env's (a bundle's options name their own prefix)
        confirm_changes(plan, state, yes=ns.yes)
        started = time.monotonic()
        with Console(quiet=ns.json) as console, listening(console):
            result = run_install(
                plan, state=state, force=frozenset(ns.force), preflight=not ns.no_preflight
            )
    if ns.json:
        emit_json(
            {**report_json(result), "notes": console.notes, "build_progress": console.progress}
        )
    else:
        from verl_bootstrap.run.summary import env_facts

        facts = env_facts(result, time.monotonic() - started)
        err(summary_text(result, facts, paint=paint))
    return EXIT_OK if result.ok else EXIT_STEP_FAILED


def opened_line(opened: OpenedBundle, *, kept: bool) -> str:
    """What checking and unpacking a bundle did (`kept`: in the tool's cache, for reuse)."""
    members = len(opened.unpacked.manifest.members)
    where = opened.unpacked.root if kept else "a scratch folder, removed after the plan"
    return (
        f"note: {opened.archive} checked and unpacked into {where} in {opened.seconds:.1f} s "
        f"({members} members, every sha256 matches its manifest)"
    )
