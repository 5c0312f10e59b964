"""`python -m installer` runs the verl-bootstrap CLI."""

from __future__ import annotations

from installer.cli import main_entry

main_entry()
