"""The tool's ArgumentParser: argparse's errors as `error:`/`hint:` lines with a "did you mean".

Apart from the parser's assembly (cli.parse) so that a command's module may parse with it (onboard
parses install's flags) without importing the command registry, which names every command.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from typing import NoReturn

from verl_bootstrap.cli.output import err

__all__ = ["Parser", "did_you_mean", "option_strings"]

EXIT_BAD_INPUT = 2


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
    import difflib  # noqa: PLC0415 - only a typo needs it: every run would pay for its import

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
