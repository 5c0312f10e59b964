"""URLs compared as URLs: scheme, host and port, then whole path segments.

A string prefix is no test of where a URL leads: `https://github.com/ORG/REPO/releases/download/`
is a prefix of `https://github.com/ORG/REPO/releases/download/../../../../attacker/x.whl`, which
the server (or any client that normalises the path) serves from the attacker's repository. So a
URL is held to a prefix here only when it parses, its scheme, host and port are the prefix's,
and its path segments start with the prefix's, and only when its path is plain: no `.` or `..`
segment, no empty segment (`a//b`), no encoded dot, slash, backslash or percent sign (`%2e%2e`,
`%2f`, `%5c`, `%252e`), which a server may decode into one, and no backslash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["path_problem", "url_remainder", "url_within"]

_ENCODED = re.compile(r"%(2e|2f|5c|25)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f]")
_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class _Url:
    origin: tuple[str, str, int | None]  # scheme, host (lower case), port (the scheme's default)
    segments: tuple[str, ...]  # the path's segments, split at `/`


def _split(url: str) -> _Url | None:
    """`url`'s origin and path segments; None when it does not parse as a URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # an unclosed IPv6 host, a port that is no number
        return None
    if not parts.scheme or not parts.hostname or _CONTROL.search(url):
        return None
    scheme = parts.scheme.lower()
    origin = (scheme, parts.hostname.lower(), port or _PORTS.get(scheme))
    return _Url(origin, tuple(parts.path.split("/")[1:]))


def path_problem(url: str) -> str | None:
    """Why `url`'s path is not a plain one (see the module's docstring); None when it is. A
    last empty segment (a folder's `/`) is plain."""
    split = _split(url)
    if split is None:
        return "it is not a URL with a host"
    inner = split.segments[:-1]
    for segment in split.segments:
        if segment in (".", ".."):
            return f"its path holds a {segment!r} segment"
        if _ENCODED.search(segment) or "\\" in segment:
            return f"its path segment {segment!r} holds an encoded dot, slash or percent sign"
    if "" in inner:
        return "its path holds an empty segment (//)"
    return None


def url_remainder(url: str, prefix: str) -> tuple[str, ...] | None:
    """The path segments of `url` past `prefix` when `url` lies under it, else None.

    `prefix` may end inside a segment (a release pattern cut at its first placeholder:
    `.../releases/download/v`): its last segment then only starts the URL's segment there."""
    want, have = _split(prefix), _split(url)
    if want is None or have is None or want.origin != have.origin or path_problem(url):
        return None
    *whole, start = want.segments or ("",)
    count = len(whole)
    if have.segments[:count] != tuple(whole) or len(have.segments) <= count:
        return None
    rest = have.segments[count:]
    if not rest[0].startswith(start) or not any(rest):  # the prefix's folder itself is not in it
        return None
    return rest


def url_within(url: str, prefix: str) -> bool:
    """Whether `url` lies under `prefix`, compared as URLs (see url_remainder)."""
    return url_remainder(url, prefix) is not None
