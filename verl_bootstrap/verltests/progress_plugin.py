"""A pytest plugin `verl-bootstrap test` loads into verl's run: where the run is, line by line.

It runs inside the env's interpreter (stdlib only) and appends the node id of each file as its
collection starts and of each test as it starts, flushed at once, so that a run stopped at its
time limit still tells which file or test it was stuck in (pytest's own report never names it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_PATH = os.environ.get("VERL_BOOTSTRAP_PROGRESS", "")


def _note(nodeid: str) -> None:
    if _PATH and nodeid:
        with Path(_PATH).open("a", encoding="utf-8") as progress:
            progress.write(nodeid + "\n")


def pytest_collectstart(collector: Any) -> None:
    """A file (or folder) is being imported."""
    _note(collector.nodeid)


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    """A test is starting."""
    _note(nodeid)
