"""The CLI's command tree, for the tests that walk every command: each leaf's words, and the
parser a leaf's words reach."""

from __future__ import annotations

import argparse

from verl_bootstrap.cli.registry import COMMANDS, Command

__all__ = ["LEAVES", "leaves", "subparser"]


def leaves(commands: tuple[Command, ...], path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The words of each command with no actions, and of each action (`wheelhouse add`)."""
    found = []
    for c in commands:
        found += leaves(c.actions, (*path, c.name)) if c.actions else [(*path, c.name)]
    return found


LEAVES = leaves(COMMANDS)


def subparser(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser `path`'s words reach from the top-level one."""
    for word in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser
