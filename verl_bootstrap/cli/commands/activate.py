"""`activate ENV`: the shell lines that enter an env (the user evals them)."""

from __future__ import annotations

import argparse
import os

from verl_bootstrap.cli.flags import env_flag, shell_flag
from verl_bootstrap.cli.output import out
from verl_bootstrap.errors import EXIT_OK, InputError

__all__ = ["cmd_activate", "flags_activate"]


def flags_activate(p: argparse.ArgumentParser) -> None:
    """activate's flags."""
    env_flag(p)
    shell_flag(p, "default: your $SHELL")


def cmd_activate(ns: argparse.Namespace) -> int:
    """`activate NAME` (or --prefix P): the shell code that enters the env."""
    from verl_bootstrap.cli.optionsbuilder import chosen_env
    from verl_bootstrap.installer.envs.activation import activation_script
    from verl_bootstrap.installer.envs.base import env_python
    from verl_bootstrap.lab.onboard import default_shell

    prefix = chosen_env(ns, command="activate")
    if not env_python(prefix).exists():
        raise InputError(f"{prefix} is not an env (no {env_python(prefix)})")
    out(activation_script(prefix, ns.shell or default_shell(os.environ)).rstrip("\n"))
    return EXIT_OK
