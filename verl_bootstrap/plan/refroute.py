"""The stack a run installs at its verl ref (locking.refstack): the ref's files read from the
source the run names (--verl-source, else the profile's repo), this run's indexes and Python."""

from __future__ import annotations

import tempfile
from pathlib import Path

from verl_bootstrap.lock.making.refstack import RefStack, StackTarget, run_reach, stack_at_ref
from verl_bootstrap.options import RunOptions
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.siteconfig.apply import index_settings
from verl_bootstrap.source.reffiles import RefFiles, ref_files

__all__ = ["run_stack"]


def run_stack(
    base: Profile, options: RunOptions, variant: str, *, check_optional: bool = True
) -> RefStack:
    """`base` at the run's verl ref for `variant` on this host (see locking.refstack)."""
    repo = options.verl_source or base.verl.repo

    def files(ref: str) -> RefFiles:
        return ref_files(repo, ref, offline=options.offline)

    platform = host_platform()
    python = _asked_python(options)
    settings, _ = index_settings(base, options, check_optional=check_optional)
    with tempfile.TemporaryDirectory(prefix="verl-ref-stack-") as work:
        reach = run_reach(
            settings,
            python=python or base.python.prefer,
            platform=platform,
            offline=options.offline,
            work=Path(work),
        )
        target = StackTarget(
            variant,
            platform,
            python,
            files,
            reach,
            frozenset({"tests"} if options.with_tests else ()),
        )
        return stack_at_ref(
            base, options.verl_ref, target, allow_unsupported=options.allow_unsupported_ref
        )


def _asked_python(options: RunOptions) -> str | None:
    """The X.Y of --python's interpreter (None: none named)."""
    if options.python is None:
        return None
    from verl_bootstrap.machine.host.interpreters import interpreter_version  # noqa: PLC0415 - --python only

    version = interpreter_version(options.python)
    return ".".join(version.split(".")[:2]) if version else None
