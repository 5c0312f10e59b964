"""The parser, derived from the command registry: one subparser per command (flags added only for
the command being run, so start-up loads one adapter module), help with a description and examples
for each, and argparse's errors turned into `error:`/`hint:` lines with a "did you mean".

The flags of the core commands (install, plan, verify, profiles) are declared here too; each
feature module declares its own commands' flags.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from verl_bootstrap.cli.flags import AGAINST_ITS_OWN, bundle_flag, env_flag, json_flag, option_flags
from verl_bootstrap.cli.output import COLOR_MODES, err, path_arg
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


def _install_flags(p: argparse.ArgumentParser, command: str) -> Any:
    """Every install option, as RunOptions declares it, in its --help group; returns the group
    the command's own behaviour flags join."""
    groups = option_flags(p, command=command)
    groups["where"].add_argument(
        "--name",
        help="the env by name: an env `envs list` shows, else a new one in the envs folder "
        "(default: the activated env, else the profile's name)",
    )
    bundle_flag(groups["sources"])
    json_flag(groups["behaviour"])
    return groups["behaviour"]


def flags_install(p: argparse.ArgumentParser) -> None:
    """install: the plan's flags, and how the run behaves."""
    group = _install_flags(p, "install")
    group.add_argument("--dry-run", action="store_true", help="show the plan and stop")
    group.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="apply a change to an existing env without asking (shown first either way)",
    )
    group.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STEP",
        help="re-run a step even if up to date",
    )
    group.add_argument("--no-preflight", action="store_true", help="skip doctor's preflight checks")


def flags_plan(p: argparse.ArgumentParser) -> None:
    """plan: the same flags that shape an install's plan."""
    _install_flags(p, "plan")


def flags_verify(p: argparse.ArgumentParser) -> None:
    """verify: which env, which checks."""
    env_flag(p)
    p.add_argument("--profile", help="profile whose checks to run (default: the env's own)")
    p.add_argument("--require-gpu", action="store_true", help="fail when no GPU smoke test can run")
    p.add_argument(
        "--against",
        type=path_arg,
        nargs="?",
        const=AGAINST_ITS_OWN,
        metavar="LOCKFILE",
        help="list every difference between the env and this lockfile (non-zero on any); "
        "alone: the lockfile the env was installed from",
    )
    p.add_argument(
        "--train",
        choices=("sft", "rl"),
        help="also run one real verl training step, offline, on a tiny model made locally: "
        "sft (seconds) or rl (one GRPO step with a rollout; about a minute on a CPU)",
    )
    p.add_argument(
        "--train-dir",
        type=path_arg,
        metavar="DIR",
        help="the training step's scratch folder: inputs, checkpoints, log (default: the env's "
        ".verl-bootstrap/train/; cluster verify --train gives each node a private one)",
    )
    json_flag(p)


def flags_profiles_list(p: argparse.ArgumentParser) -> None:
    """profiles list."""
    json_flag(p)


def flags_profiles_show(p: argparse.ArgumentParser) -> None:
    """profiles show NAME."""
    p.add_argument("name", help="a shipped profile name or a YAML file")
    p.add_argument("--verl-ref", help="show the stack this verl ref gets")
    json_flag(p)


def flags_profiles_validate(p: argparse.ArgumentParser) -> None:
    """profiles validate FILE."""
    p.add_argument("file", type=path_arg, help="the profile's YAML file")
    json_flag(p)
