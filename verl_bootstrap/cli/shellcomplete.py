"""Shell completion through argcomplete: the shell runs verl-bootstrap with _ARGCOMPLETE set, and
the tool answers from its own parser. Imported only then (and by `completion SHELL`), so the
normal start-up never loads it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import argcomplete
from argcomplete.completers import DirectoriesCompleter
from argcomplete.shell_integration import shellcode

from verl_bootstrap.paths import PROFILES_DIR
from verl_bootstrap.run.state.envindex import env_name, known_prefixes, live_prefixes

__all__ = ["SHELLS", "complete", "shell_script"]

SHELLS = ("bash", "zsh", "fish")
PROG = "verl-bootstrap"


def shell_script(shell: str) -> str:
    """The script that makes `shell` complete verl-bootstrap (source it, or install it)."""
    return str(shellcode([PROG], shell=shell))


def complete(parser: argparse.ArgumentParser, commands: frozenset[str]) -> None:
    """Answer the shell's completion request and exit (argcomplete's protocol)."""
    _default_command(commands)
    _attach_completers(parser)
    argcomplete.autocomplete(parser)


def _default_command(commands: frozenset[str]) -> None:
    """`verl-bootstrap --profile …` means `install --profile …`: complete it the same way."""
    line = os.environ.get("COMP_LINE", "")
    words = line.split()
    if len(words) < 2 or words[1] in commands or words[1] in ("-h", "--help", "--version"):
        return
    if not words[1].startswith("--") or words[1] in ("--", "--v", "--ve", "--ver"):
        return
    head = words[0]
    os.environ["COMP_LINE"] = line.replace(head, f"{head} install", 1)
    point = int(os.environ.get("COMP_POINT", len(line)))
    os.environ["COMP_POINT"] = str(point + len(" install"))


def _attach_completers(parser: argparse.ArgumentParser) -> None:
    for action in _actions(parser):
        if "--profile" in action.option_strings:
            action.completer = _profiles  # type: ignore[attr-defined]
        elif "--prefix" in action.option_strings:
            action.completer = _prefixes  # type: ignore[attr-defined]
        elif "--name" in action.option_strings or action.dest == "env":
            action.completer = _names  # type: ignore[attr-defined]


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found = list(parser._actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _actions(sub)
    return found


def _profiles(**_: Any) -> dict[str, str]:
    """The shipped profiles' names (read from the folder: loading them takes too long for a Tab)."""
    names = sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))
    return dict.fromkeys(names, "a shipped profile")  # zsh and fish show the words


def _names(prefix: str, **_: Any) -> dict[str, str]:
    """The names of the envs the tool knows (`verify cpu`), each with its folder."""
    return {env_name(p): str(p) for p in live_prefixes() if env_name(p).startswith(prefix)}


def _prefixes(prefix: str, **_: Any) -> dict[str, str]:
    """The envs the tool knows, then any folder (a new prefix may be anywhere)."""
    known = dict.fromkeys((str(p) for p in known_prefixes() if str(p).startswith(prefix)), "env")
    folders = DirectoriesCompleter()(prefix)
    return {**known, **{d: "folder" for d in folders if d.rstrip("/") not in known}}
