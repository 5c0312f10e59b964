"""Onboarding: one non-interactive command from nothing to a verified env of the lab's profile."""

from __future__ import annotations

from verl_bootstrap.lab.onboard.flow import (
    OnboardResult,
    describe,
    fetch_file,
    lab_defaults,
    local_profile,
    onboard,
)
from verl_bootstrap.lab.onboard.script import onboarding_script
from verl_bootstrap.lab.onboard.shellrc import (
    default_shell,
    rc_file,
    user_activation,
    write_rc_block,
)

__all__ = [
    "OnboardResult",
    "default_shell",
    "describe",
    "fetch_file",
    "lab_defaults",
    "local_profile",
    "onboard",
    "onboarding_script",
    "rc_file",
    "user_activation",
    "write_rc_block",
]
