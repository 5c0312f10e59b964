"""`run ENV -- COMMAND`: a command inside an env, activated, the user's shell left as it was."""

from __future__ import annotations

import argparse

from verl_bootstrap.cli.flags import env_flag
from verl_bootstrap.errors import InputError

__all__ = ["cmd_run", "flags_run"]


def flags_run(p: argparse.ArgumentParser) -> None:
    """run [ENV] -- COMMAND...: the command is everything after `--` (cli.main splits it off)."""
    p.usage = "verl-bootstrap run [ENV] [--name NAME | --prefix PATH] -- COMMAND [ARG ...]"
    env_flag(p)
    p.add_argument("words", nargs="*", metavar="COMMAND", help="the command to run, after --")


def cmd_run(ns: argparse.Namespace) -> int:
    """`run NAME -- CMD`: the command inside the env, activated, the shell left as it was; its
    exit code is ours."""
    from verl_bootstrap import proc
    from verl_bootstrap.cli.optionsbuilder import chosen_env
    from verl_bootstrap.installer.envs.activation import inside
    from verl_bootstrap.installer.envs.base import env_python

    command = list(getattr(ns, "command_line", None) or ns.words)
    if not command:
        raise InputError(
            "run: no command given (it goes after --)",
            hint="verl-bootstrap run NAME -- python -c 'import verl'",
        )
    prefix = chosen_env(ns, command="run")
    if not env_python(prefix).exists():
        raise InputError(f"run: {prefix} is not an env (no {env_python(prefix)})")
    return proc.interactive(inside(prefix, command))
