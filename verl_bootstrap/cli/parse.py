"""The parser, derived from the command registry: one subparser per command (flags added only for
the command being run, so start-up loads one adapter module), help with a description and examples
for each, and argparse's errors turned into `error:`/`hint:` lines with a "did you mean".

Each command's flags sit beside its handler, in its module under cli/commands/.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable
from typing import NoReturn

from verl_bootstrap.cli.output import COLOR_MODES, err
from verl_bootstrap.cli.registry import COMMANDS, Command, resolve

__all__ = ["Parser", "build_parser", "did_you_mean", "option_strings"]

EXIT_BAD_INPUT = 2
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


class Parser(argparse.ArgumentParser):
    """argparse with the tool's error form: `error: …` and a `hint:` naming the closest flag or
    action, exit 2."""

    command = ""  # the top-level parser's: the command being parsed, for its errors' hints

    def error(self, message: str) -> NoReturn:
        where = f"{self.prog} {self.command}".strip()
        err(f"error: {where}: {message}")
        err(f"hint: {_hint(self, message) or f'`{where} --help` lists every flag'}")
        sys.exit(EXIT_BAD_INPUT)


def did_you_mean(word: str, known: Iterable[str]) -> str | None:
    """The closest of `known` to a mistyped `word`, if one is close."""
    close = difflib.get_close_matches(word, sorted(set(known)), n=1, cutoff=0.6)
    return close[0] if close else None


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every flag `parser` and the subparsers it holds accept."""
    found = [s for a in parser._actions for s in a.option_strings]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += option_strings(sub)
    return found


def _hint(parser: argparse.ArgumentParser, message: str) -> str | None:
    if message.startswith("unrecognized arguments:"):
        flags = [w.split("=")[0] for w in message.split(":", 1)[1].split() if w.startswith("-")]
        known = option_strings(parser)
        guesses = [(f, g) for f in flags if (g := did_you_mean(f, known))]
        if len(guesses) == 1 and len(flags) == 1:
            return f"did you mean {guesses[0][1]}?"
        return "did you mean " + ", ".join(f"{g} for {f}" for f, g in guesses) if guesses else None
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        guess = did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        return f"did you mean {guess!r}?" if guess else None
    return None


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
    if full:
        resolve(entry.flags)(p)
        p.add_argument(
            "--color",
            choices=COLOR_MODES,
            default="auto",
            help="colour: auto (on a terminal, unless NO_COLOR is set), always, never",
        )
    p.set_defaults(handler=entry.handler)
