"""One CLI surface: each shared flag declared once (cli/flags.py), meaning the same in every
command that takes it, and a command's help the same whether its parser is built alone (as a run
builds it, loading one command's module) or with every other command's."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
from clitree import LEAVES, subparser

from verl_bootstrap.cli.flags import SHARED_FLAGS
from verl_bootstrap.cli.parse import build_parser

CLI = Path(__file__).resolve().parents[1] / "verl_bootstrap" / "cli"


def _spelled(path: Path) -> list[tuple[int, str]]:
    """(line, flag) for each `add_argument("--flag", ...)` in a module that spells a shared flag."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            words = [a.value for a in node.args if isinstance(a, ast.Constant)]
            found += [(node.lineno, w) for w in words if w in SHARED_FLAGS]
    return found


def test_no_command_module_spells_a_shared_flag() -> None:
    spelled = [
        f"{path.name}:{line} {flag}"
        for path in sorted((CLI / "commands").glob("*.py"))
        for line, flag in _spelled(path)
    ]
    assert not spelled, "use the function in cli/flags.py: " + ", ".join(spelled)


def test_cli_flags_declares_each_shared_flag_once() -> None:
    counts = {flag: 0 for flag in SHARED_FLAGS}
    for _, flag in _spelled(CLI / "flags.py"):
        counts[flag] += 1
    assert {f: n for f, n in counts.items() if n != 1} == {}


def test_the_check_sees_a_flag_spelled_by_hand(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('def f(p):\n    p.add_argument("--profile", help="x")\n', encoding="utf-8")
    assert _spelled(module) == [(2, "--profile")]


def _shared_actions() -> dict[str, list[tuple[str, argparse.Action]]]:
    """For each shared flag, (command, its action) in every command that takes it."""
    parser = build_parser(None)
    found: dict[str, list[tuple[str, argparse.Action]]] = {}
    for path in LEAVES:
        for action in subparser(parser, path)._actions:
            for flag in set(action.option_strings) & set(SHARED_FLAGS):
                found.setdefault(flag, []).append((" ".join(path), action))
    return found


def test_a_shared_flag_means_the_same_in_every_command() -> None:
    """Same spellings and destination everywhere; where the help is not the command's own
    wording (--json, --platform), the same help too."""
    differing = []
    for flag, actions in sorted(_shared_actions().items()):
        shapes = {(tuple(a.option_strings), a.dest) for _, a in actions}
        if len(shapes) > 1:
            differing.append(f"{flag}: {sorted(shapes)}")
        if flag in ("--json", "--platform") and len({a.help for _, a in actions}) > 1:
            differing.append(f"{flag}: helps differ")
    assert not differing


def test_every_shared_flag_is_taken_by_two_commands_at_least() -> None:
    taken = {flag: len(actions) for flag, actions in _shared_actions().items()}
    assert {f: taken.get(f, 0) for f in SHARED_FLAGS if taken.get(f, 0) < 2} == {}


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_a_command_help_is_the_same_built_alone_or_with_every_command(
    path: tuple[str, ...],
) -> None:
    alone = subparser(build_parser(path[0]), path).format_help()
    assert alone == subparser(build_parser(None), path).format_help()
