"""`plan`: the step graph an install would run, printed; nothing runs."""

from __future__ import annotations

import argparse

from verl_bootstrap.cli.flags import install_option_flags
from verl_bootstrap.cli.output import emit_json, err, out
from verl_bootstrap.errors import EXIT_OK

__all__ = ["cmd_plan", "flags_plan"]


def flags_plan(p: argparse.ArgumentParser) -> None:
    """plan: the same flags that shape an install's plan."""
    install_option_flags(p, "plan")


def cmd_plan(ns: argparse.Namespace) -> int:
    """`plan`: print the graph, run nothing (a --bundle is unpacked into a scratch folder that is
    removed once the plan is shown: the tool's cache is left as it was)."""
    import tempfile
    from pathlib import Path

    from verl_bootstrap.cli.commands.install import opened_line
    from verl_bootstrap.cli.optionsbuilder import run_options
    from verl_bootstrap.cli.planview import plan_json, plan_text
    from verl_bootstrap.plan.choices import Bundle
    from verl_bootstrap.run.installrun import prepare_plan
    from verl_bootstrap.siteconfig.apply import applied_environment

    options = run_options(ns)
    with (
        applied_environment(dict(options.site.environment)),
        tempfile.TemporaryDirectory(prefix="verl-plan-bundle-") as scratch,
    ):
        bundle = None if ns.bundle is None else Bundle(ns.bundle, into=Path(scratch))
        plan = prepare_plan(options, bundle=bundle, planning=True)
        if plan.opened is not None:
            err(opened_line(plan.opened, kept=False))
        if ns.json:
            emit_json(plan_json(plan))
        else:
            out(plan_text(plan))
    return EXIT_OK
