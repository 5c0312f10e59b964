"""The only place that writes to the terminal: a leaf every CLI module may import. It also decides
whether a stream gets colour (--color, NO_COLOR, a terminal).

Text from files other people made (an index key, a record's profile name, a lockfile's field),
from other machines (a node's name) and from subprocesses can hold control characters: an escape
sequence would drive the terminal, a carriage return would write over what the line said, and a
bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE, the isolates) would show the line's text
in another order than it has. Every line written here shows them as `\\xNN` or `\\uNNNN`
instead; a line break and a tab stay, since the tool's own messages are laid out with them.
`paint` marks its colours with private-use characters that only this module turns into colour
codes, after the text around them was made printable.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import secrets
import sys
from pathlib import Path
from typing import Any, TextIO

from verl_bootstrap.redact import redact

__all__ = [
    "COLOR_MODES",
    "emit_json",
    "err",
    "mark",
    "out",
    "paint",
    "path_arg",
    "printable",
    "set_color",
    "wants_color",
]

COLOR_MODES = ("auto", "always", "never")
_STYLE = {"ok": "32", "warn": "33", "fail": "31", "dim": "2", "bold": "1", "step": "36"}
_mode = ["auto"]  # set once per run by the CLI's entry (--color); a list so no `global` is needed

# C0 controls but tab and line feed, DEL and the C1 controls (a terminal reads \x9b as ESC [);
# the bidirectional marks, embeddings, overrides and isolates, and the Unicode line and
# paragraph separators (a break the tool did not write)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
# paint's marks around a colour's number, with a key of this process: text from elsewhere (a
# node's name) holding the marks themselves cannot forge a colour (8: text made invisible)
_OPEN, _CLOSE = f"\ue000{secrets.token_hex(6)}", "\ue001"
_MARKED = re.compile(f"{_OPEN}([0-9]+){_CLOSE}")


def printable(text: str) -> str:
    """`text` with every credential masked (the last wall: callers redact what they print too),
    every control character but a line break and a tab shown as `\\xNN` (a bidirectional one
    as `\\uNNNN`), then paint's colour marks turned into colour codes."""
    shown = _CONTROL.sub(_escaped, redact(text))
    return _MARKED.sub(lambda found: f"\x1b[{found[1]}m", shown)


def _escaped(found: re.Match[str]) -> str:
    code = ord(found[0])
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def set_color(mode: str) -> None:
    """--color auto|always|never for this run."""
    _mode[0] = mode


def wants_color(stream: TextIO) -> bool:
    """Colour on `stream`: always/never as asked; auto is a terminal, NO_COLOR unset
    (no-color.org: any value), and a TERM that is not dumb."""
    if _mode[0] != "auto":
        return _mode[0] == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def paint(text: str, style: str, stream: TextIO | None = None) -> str:
    """`text` in `style` (ok, warn, fail, dim, bold, step) when `stream` (stderr) takes colour;
    the colour shows once the line goes through `printable` (out, err and the live console)."""
    code = _STYLE.get(style)
    if not code or not text or not wants_color(stream or sys.stderr):
        return text
    plain = text.replace(_OPEN, "\\ue000").replace(_CLOSE, "\\ue001")  # its own marks' end
    return f"{_OPEN}{code}{_CLOSE}{plain}{_OPEN}0{_CLOSE}"


_MARKS = {"ok": ("✓", "ok"), "warn": ("!", "warn"), "fail": ("✗", "fail"), "skipped": ("·", "dim")}


def mark(status: str, stream: TextIO | None = None) -> str:
    """A check's mark (✓ ! ✗ ·), coloured for `stream` (stdout by default)."""
    symbol, style = _MARKS.get(status, ("?", ""))
    return paint(symbol, style, stream or sys.stdout)


def emit_json(body: dict[str, Any]) -> None:
    """Print one JSON document."""
    print(redact(json.dumps(body, indent=2, sort_keys=True, default=str)))


def out(text: str = "") -> None:
    """Print a line to stdout."""
    print(printable(text))


def err(text: str) -> None:
    """Print a line to stderr."""
    print(printable(text), file=sys.stderr)


# bytes of one name (as Linux file systems take it) and of a whole path: half the system's 4096,
# so what the tool puts under a path (an env's site-packages, its state) fits too
_NAME_MAX, _PATH_MAX = 255, 2048


def path_arg(value: str) -> Path:
    """An argparse type for paths (expands ~). An empty one (it would be the current folder:
    `--prefix ''` planned an env there) and one too long for what the tool puts under it are
    refused, so argparse exits 2 naming the flag."""
    if not value:
        raise argparse.ArgumentTypeError("an empty path (give a folder, e.g. ./env)")
    path = Path(value).expanduser()
    longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
    if longest > _NAME_MAX or len(os.fsencode(str(path))) > _PATH_MAX:
        raise argparse.ArgumentTypeError(
            f"a path of {len(value)} characters: a name in it may be at most {_NAME_MAX} "
            f"bytes, the whole path {_PATH_MAX}"
        )
    return path


def seconds_arg(value: str) -> float:
    """An argparse type for a duration: a finite number of seconds, 0 or more (nan, inf and a
    negative number are refused: argparse then exits 2 naming the flag)."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number of seconds >= 0")
    return seconds
