"""`completion --shell SHELL`: the shell completion script."""

from __future__ import annotations

import argparse

from verl_bootstrap.cli.flags import shell_flag
from verl_bootstrap.cli.output import out
from verl_bootstrap.errors import EXIT_OK, InputError

__all__ = ["cmd_completion", "flags_completion"]


def flags_completion(p: argparse.ArgumentParser) -> None:
    """completion --shell SHELL (the shell is a flag, as in `activate` and `onboard`)."""
    shell_flag(p, "the shell to complete in (default: $SHELL)")
    p.add_argument("old_shell", nargs="?", metavar="SHELL", help=argparse.SUPPRESS)


def cmd_completion(ns: argparse.Namespace) -> int:
    """`completion --shell SHELL`: the script to source (or to install in the shell's completion
    folder)."""
    import os

    from verl_bootstrap.cli.shellcomplete import shell_script
    from verl_bootstrap.lab.onboard import default_shell

    if ns.old_shell is not None:
        raise InputError(
            f"completion takes the shell as a flag, not as the word {ns.old_shell!r}",
            hint=f"verl-bootstrap completion --shell {ns.old_shell}",
        )
    out(shell_script(ns.shell or default_shell(os.environ)))
    return EXIT_OK
