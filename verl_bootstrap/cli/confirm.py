"""The questions a command asks before it changes something: the changes a run makes to an existing
env, shown and confirmed (install, update, remove), and a yes at a prompt."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.output import err, printable
from verl_bootstrap.errors import Declined, Refused

if TYPE_CHECKING:
    from verl_bootstrap.plan.graph import Plan
    from verl_bootstrap.run.state.state import State

__all__ = ["ask", "confirm", "confirm_changes"]


def confirm_changes(plan: Plan, state: State | None, *, yes: bool) -> None:
    """Show what the run changes in an existing env (its `state` as the run read it); go on only
    with --yes or a yes at a prompt."""
    from verl_bootstrap.run.state.changes import changes_for  # noqa: PLC0415 (off `remove --help`)

    changes = changes_for(plan, state)
    if changes is None:
        return
    err(f"this run changes the env at {plan.prefix}:\n  {changes.summary()}")
    data = changes.to_dict()
    if changes.blockers:
        raise Refused(
            f"this change cannot be applied in place: {'; '.join(changes.blockers)}; "
            f"{plan.prefix} was not changed",
            hint=f"build it in a new prefix: add --prefix {plan.prefix}-new to your command",
            data=data,
        )
    if not yes:
        confirm(
            "apply these changes? [y/N] ",
            f"{plan.prefix} was not changed",
            "re-run with --yes to apply these changes",
            data=data,
        )


def confirm(
    question: str, unchanged: str, hint: str, *, data: Mapping[str, Any] | None = None
) -> None:
    """Go on after a yes at the prompt. A no is the user's answer, not an error (Declined, exit
    0); with no terminal to ask on, the run is refused (exit 3), so a script never hangs.
    `data`: what would have changed, for the refusal's --json."""
    if not sys.stdin.isatty():
        asked = {"terminal": False, **(data or {})}  # no one to ask: refused, not declined
        raise Refused(f"{unchanged}: no terminal to ask on", hint=hint, data=asked)
    if not ask(question):
        raise Declined(unchanged)


def ask(question: str) -> bool:
    """A yes at a prompt on a terminal; no terminal is a no."""
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(printable(question))  # it may name a path: shown as out() shows it
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")
