"""`python -m verl_bootstrap` runs the verl-bootstrap CLI."""

from __future__ import annotations

from verl_bootstrap.cli import main_entry

main_entry()
