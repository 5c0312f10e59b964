"""The parser, derived from the command registry: one subparser per command (flags added only for
the command being run, so start-up loads one adapter module), help with a description and examples
for each; argparse's errors are cli.argparser's `error:`/`hint:` lines with a "did you mean".

Each command's flags sit beside its handler, in its module under cli/commands/.
"""

from __future__ import annotations

import argparse

from verl_bootstrap.cli.argparser import Parser
from verl_bootstrap.cli.output import COLOR_MODES
from verl_bootstrap.cli.registry import COMMANDS, Command

__all__ = ["build_parser"]
_MAIN_USAGE = """\
  verl-bootstrap --profile NAME [FLAGS]   build and verify an env (same as `install`)
  verl-bootstrap COMMAND [FLAGS]          one of the commands below
  verl-bootstrap help [COMMAND]           this help, or a command's"""
_EPILOG = """\
examples:
  verl-bootstrap --profile cpu            # anywhere: laptops, CI, verl's CPU tests
  verl-bootstrap --profile fsdp           # on a GPU server
  verl-bootstrap plan --profile fsdp      # what it would do; runs nothing

Exit codes: 0 ok, 1 a step failed, 2 bad input, 3 refused by a preflight check, 130 interrupted.
--debug (anywhere on the line) prints the trace of an unexpected error."""


def build_parser(command: str | None = None) -> Parser:
    """The parser for every command; flags are added for `command` only (every command's when
    None: completion and the help checks need them all)."""
    parser = Parser(
        prog="verl-bootstrap",
        usage=f"\n{_MAIN_USAGE}",
        description="Build a verified, reproducible verl environment with one command.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from verl_bootstrap import __version__

    parser.command = command or ""
    parser.add_argument("--version", action="version", version=f"verl-bootstrap {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser, prog=parser.prog, title="commands"
    )
    for entry in COMMANDS:
        _add(sub, entry, full=command is None or command == entry.name)
    return parser


def _add(sub: argparse._SubParsersAction[Parser], entry: Command, *, full: bool) -> None:
    examples = "\n".join(f"  {e}" for e in entry.examples)
    p = sub.add_parser(
        entry.name,
        help=entry.summary,
        description=entry.summary,
        epilog=f"examples:\n{examples}" if examples else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if entry.actions:
        actions = p.add_subparsers(dest="action", required=True, metavar="ACTION", title="actions")
        for action in entry.actions:
            _add(actions, action, full=full)
        return
    if full and entry.wire:  # the one command being run (or every one): its module loads here
        flags, handler = entry.wire()
        flags(p)
        p.set_defaults(handler=handler)
        p.add_argument(
            "--color",
            choices=COLOR_MODES,
            default="auto",
            help="colour: auto (on a terminal, unless NO_COLOR is set), always, never",
        )
