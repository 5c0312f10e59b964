"""The only place that writes to the terminal: a leaf every CLI module may import.

Text from files other people made (an index key, a record's profile name, a lockfile's field)
can hold control characters: an escape sequence would drive the terminal, a carriage return
would write over what the line said. Every line written here shows them as `\\xNN` instead;
a line break and a tab stay, since the tool's own messages are laid out with them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["emit_json", "err", "out", "path_arg", "printable"]

# C0 controls but tab and line feed, DEL and the C1 controls (a terminal reads \x9b as ESC [).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character but a line break and a tab shown as `\\xNN`."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found[0]):02x}", text)


def emit_json(body: dict[str, Any]) -> None:
    """Print one JSON document."""
    print(json.dumps(body, indent=2, sort_keys=True, default=str))


def out(text: str = "") -> None:
    """Print a line to stdout."""
    print(printable(text))


def err(text: str) -> None:
    """Print a line to stderr."""
    print(printable(text), file=sys.stderr)


def path_arg(value: str) -> Path:
    """An argparse type for paths (expands ~)."""
    return Path(value).expanduser()
