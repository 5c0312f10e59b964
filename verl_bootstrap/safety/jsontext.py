"""The one JSON parser for files the tool did not just write itself: depth-bounded.

Python's json decoder recurses once per nesting level, so 100,000 `[` in a bundle manifest, a
state file or a wheelhouse index end in a RecursionError instead of a message. The nesting is
counted first (strings left out, one linear pass) and a document deeper than `MAX_DEPTH` is a
`json.JSONDecodeError`, which every reader already turns into its clear error.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

__all__ = ["MAX_DEPTH", "loads"]

MAX_DEPTH = 64  # the tool's own JSON nests at most 5 deep
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads(text, **options)`, refusing a document nested deeper than MAX_DEPTH."""
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    steps = (1 if c in "[{" else -1 for c in brackets)
    if max(accumulate(steps), default=0) > MAX_DEPTH:
        msg = f"nested deeper than {MAX_DEPTH} levels"
        raise json.JSONDecodeError(msg, text, 0)
    return json.loads(text, **options)
