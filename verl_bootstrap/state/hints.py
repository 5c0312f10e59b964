"""The commands the tool suggests about an env."""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["resume_command"]


def resume_command(prefix: Path) -> str:
    """Resumes (or re-verifies) the env with the options it recorded: nothing else is needed."""
    return f"verl-bootstrap --prefix {shlex.quote(str(prefix))}"
