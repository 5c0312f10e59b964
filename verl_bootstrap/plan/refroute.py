"""The stack a run installs at its verl ref (lock.making.refstack): the ref's files read from the
source the run names (--verl-source, else the profile's repo), this run's indexes and Python."""

from __future__ import annotations

from verl_bootstrap.lock.making.refstack import RefStack, asked_stack
from verl_bootstrap.options import RunOptions
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.profile.models import Profile

__all__ = ["run_stack"]


def run_stack(
    base: Profile, options: RunOptions, variant: str, *, check_optional: bool = True
) -> RefStack:
    """`base` at the run's verl ref for `variant` on this host (see lock.making.refstack)."""
    target = (variant, host_platform(), _asked_python(options))
    return asked_stack(
        base, options, target, tests=options.with_tests, check_optional=check_optional
    )


def _asked_python(options: RunOptions) -> str | None:
    """The X.Y of --python's interpreter (None: none named)."""
    if options.python is None:
        return None
    from verl_bootstrap.machine.host.interpreters import interpreter_version  # noqa: PLC0415 - --python only

    version = interpreter_version(options.python)
    return ".".join(version.split(".")[:2]) if version else None
