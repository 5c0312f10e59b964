"""One module per command, named by its word (`verl-bootstrap lock` is commands/lock.py; a group's
actions, like `envs list`, in the group's module): its flags (`flags_NAME`, the argparse wiring)
beside its handler (`cmd_NAME`: parse, call the library, print through cli.output, exit code).

cli.registry names them as `commands.lock.cmd_lock`. This package imports none of them itself: the
first `commands.NAME` imports that module (PEP 562), so only the command being run is loaded.
Type checkers and editors see the modules through the TYPE_CHECKING import below.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verl_bootstrap.cli.commands import (
        activate,
        bundle,
        cluster,
        completion,
        config,
        doctor,
        envs,
        export,
        info,
        install,
        kernels,
        lock,
        onboard,
        plan,
        profiles,
        remove,
        run,
        test,
        update,
        verify,
        wheelhouse,
    )

__all__ = [
    "activate",
    "bundle",
    "cluster",
    "completion",
    "config",
    "doctor",
    "envs",
    "export",
    "info",
    "install",
    "kernels",
    "lock",
    "onboard",
    "plan",
    "profiles",
    "remove",
    "run",
    "test",
    "update",
    "verify",
    "wheelhouse",
]


def __getattr__(name: str) -> ModuleType:
    """`commands.NAME`, the first time: import cli/commands/NAME.py (then it is an attribute)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
