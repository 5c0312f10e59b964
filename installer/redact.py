"""Secrets never leave the process: credentials in URLs are masked everywhere we print or store."""

from __future__ import annotations

import re

__all__ = ["redact", "redact_args"]

# user:password@ or token@ in any scheme://… URL, including git+https and file-less forms.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
# Query-string credentials some mirrors use (?token=…, &access_token=…).
_QUERY = re.compile(r"(?P<key>[?&](?:token|access_token|api_key|password)=)[^&\s]+", re.I)


def redact(text: str) -> str:
    """Mask credentials in every URL inside `text`."""
    text = _USERINFO.sub(lambda m: f"{m['scheme']}***@", text)
    return _QUERY.sub(lambda m: f"{m['key']}***", text)


def redact_args(args: list[str] | tuple[str, ...]) -> list[str]:
    """Mask credentials in each argument of a command line."""
    return [redact(a) for a in args]
