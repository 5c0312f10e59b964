"""Profiles are read by the one bounded YAML reader, verl_bootstrap.safety.yamlfile."""

from __future__ import annotations

from pathlib import Path

from verl_bootstrap.safety.yamlfile import Key, Located, load_yaml

__all__ = ["Key", "Located", "load_located"]

MAX_PROFILE_BYTES = 1024 * 1024  # the largest shipped profile is under 10 KB


def load_located(path: Path) -> Located:
    """Parse a profile file; raise InputError naming file:line on anything wrong with it."""
    return load_yaml(path, what="profile", max_bytes=MAX_PROFILE_BYTES)
