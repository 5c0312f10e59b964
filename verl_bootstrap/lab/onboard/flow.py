"""Onboarding: from nothing to a verified env of the lab's default profile, non-interactively.

The CLI applies the lab's site config, builds the run's options (the lab's default profile,
`--locked` from the lab's lockfile) and their plan, and says its route; this module installs,
writes the activation the user sources (and, when asked, the block in their shell rc), and ends
with doctor's verdict.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.lab.onboard.shellrc import rc_file, user_activation, write_rc_block
from verl_bootstrap.paths import tool_home
from verl_bootstrap.plan.doctor import DoctorInputs, run_doctor
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.redact import redact
from verl_bootstrap.run.installrun import InstallResult, run_install
from verl_bootstrap.siteconfig import LoadedSite
from verl_bootstrap.siteconfig.files import fetch_file, local_profile

if TYPE_CHECKING:
    from verl_bootstrap.plan.doctor import DoctorReport

__all__ = [
    "OnboardResult",
    "describe",
    "fetch_file",
    "lab_defaults",
    "local_profile",
    "onboard",
]


@dataclass(frozen=True)
class OnboardResult:
    """What onboarding did, and the verdict."""

    install: InstallResult
    activation: Mapping[str, Path]  # shell -> the file the user sources
    rc_files: tuple[Path, ...]  # shell rc files that source it (--shell-init)
    doctor: DoctorReport | None
    lockfile: Path | None

    @property
    def ok(self) -> bool:
        """The install succeeded and doctor found nothing failing."""
        return self.install.ok and (self.doctor is None or self.doctor.ok)


def lab_defaults(
    site: LoadedSite, profile: str | None, lockfile: str | None
) -> tuple[str, str | None]:
    """The profile and lockfile to onboard with: the flags, else the lab config's defaults."""
    chosen = profile or site.config.defaults.profile
    if not chosen:
        raise InputError(
            "the lab config names no default profile (defaults.profile) and no --profile was given",
            hint="add `defaults: {profile: NAME}` to the lab config, or pass --profile NAME",
        )
    return chosen, lockfile or site.config.defaults.lockfile


def onboard(
    plan: Plan,
    *,
    shells: tuple[str, ...],
    shell_init: bool,
    lockfile: Path | None,
    environ: Mapping[str, str] | None = None,
) -> OnboardResult:
    """Install `plan` (prepare_plan's: locked when a lockfile is given), write the activation,
    then run doctor."""
    env = dict(os.environ if environ is None else environ)
    result = run_install(plan, preflight=True)
    if not result.ok:
        return OnboardResult(result, {}, (), None, lockfile)
    files = user_activation(plan.prefix, tool_home(env))
    rcs = _shell_init(shells, files, env) if shell_init else ()
    return OnboardResult(result, files, rcs, _doctor(plan, env), lockfile)


def _shell_init(
    shells: tuple[str, ...], files: Mapping[str, Path], environ: Mapping[str, str]
) -> tuple[Path, ...]:
    home = Path(environ.get("HOME") or Path.home())
    done = []
    for shell in shells:
        rc = rc_file(shell, environ, home)
        write_rc_block(rc, shell, files["fish" if shell == "fish" else "bash"])
        done.append(rc)
    return tuple(done)


def _doctor(plan: Plan, environ: Mapping[str, str]) -> DoctorReport | None:
    """Doctor's verdict on the new env."""
    inputs = DoctorInputs(
        profile=plan.profile,
        variant=plan.variant,
        prefix=plan.prefix,
        environ=dict(environ),
        skip=frozenset(plan.skip_checks),
    )
    return run_doctor(inputs)


def describe(result: OnboardResult) -> dict[str, Any]:
    """The JSON body of `onboard --json` (the install report is added by the CLI)."""
    return {
        "ok": result.ok,
        "lockfile": redact(str(result.lockfile)) if result.lockfile else None,
        "activation": {shell: str(path) for shell, path in result.activation.items()},
        "shell_init": [str(p) for p in result.rc_files],
        "doctor": result.doctor.to_dict() if result.doctor else None,
    }
