"""Subcommands of the lock feature (registered by cliparse)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add this feature's subcommands to `sub`."""
    del sub  # no subcommands yet
