"""The only place that writes to the terminal: a leaf every CLI module may import."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["emit_json", "err", "out", "path_arg"]


def emit_json(body: dict[str, Any]) -> None:
    """Print one JSON document."""
    print(json.dumps(body, indent=2, sort_keys=True, default=str))


def out(text: str = "") -> None:
    """Print a line to stdout."""
    print(text)


def err(text: str) -> None:
    """Print a line to stderr."""
    print(text, file=sys.stderr)


def path_arg(value: str) -> Path:
    """An argparse type for paths (expands ~)."""
    return Path(value).expanduser()
