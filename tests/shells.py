"""The shells the activation and completion tests source: bash and sh are always there; zsh and
fish come from `make test-shells` (run by `make test`), which installs them with apt-get as root
and otherwise unpacks Debian's packages into the venv's test-shells folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

UNPACKED = Path(__file__).resolve().parents[1] / ".venv" / "test-shells" / "bin"


def shell_path(name: str) -> str:
    """The full path of shell `name`, or the test fails saying how to get it (a test is skipped
    only for a missing GPU)."""
    found = shutil.which(name) or shutil.which(name, path=str(UNPACKED))
    if found is None:
        pytest.fail(f"{name} is not installed here: `make test-shells` installs it")
    return found
