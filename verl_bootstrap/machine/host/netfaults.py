"""A network failure as the user can fix it: which host, what went wrong, and the setting that
fixes it (the site config's `network.ca_bundle`, `network.proxy`, or a mirror).

uv, pip, git, curl and requests each word a failure their own way, and uv and pip end theirs with
a hint naming their own flags (`--system-certs`, `--trusted-host`, ...), which verl-bootstrap
does not have: the user cannot pass them, and the tool already sets what they stand for from the
site config. So a failure is read here, whoever wrote it, and said once in the tool's words; the
installers' hints are left out of what is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["SITE_CONFIG", "NetFault", "net_fault", "without_tool_hints"]

SITE_CONFIG = "~/.config/verl-bootstrap/config.yaml"  # the user's own; a lab's works the same

# (kind, what went wrong, the words each tool uses for it), in the order they are tried: a TLS
# failure through a proxy is a TLS failure, a refused proxy is the proxy's
_KINDS = (
    (
        "tls",
        "its TLS certificate is not trusted here",
        r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|invalid peer certificate|"
        r"UnknownIssuer|self[- ]signed certificate|SSL certificate problem|"
        r"server certificate verification failed|unable to get local issuer certificate|"
        r"certificate is not trusted|CaUsedAsEndEntity",
    ),
    (
        "proxy",
        "the proxy did not let the request through",
        r"ProxyError|Unable to connect to proxy|Failed to connect to proxy|"
        r"HTTP code 407 from proxy|Proxy Authentication Required|proxy connect",
    ),
    (
        "dns",
        "its name does not resolve",
        r"Could not resolve host|Name or service not known|Temporary failure in name resolution|"
        r"NameResolutionError|failed to lookup address|nodename nor servname|No address associated",
    ),
    ("refused", "it refused the connection", r"Connection refused|ConnectionRefusedError"),
    ("timeout", "it did not answer in time", r"\btimed out\b|\b(Read|Connect)?Timeout(Error)?\b"),
)
_HOST_PATTERNS = (
    re.compile(r"host='([^']+)', port=(\d+)"),  # urllib3 (requests, pip)
    re.compile(r"Could not resolve host: ([^\s'\"]+)"),  # curl, git
    re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"`<>()]+"),  # any URL: uv, git, pip
)
# An installer's own advice names its own flags: `--system-certs`, `--native-tls`,
# `--trusted-host`, `--allow-insecure-host`, `--cert` (uv's `hint:`, pip's `HINT:`/`help:`)
_TOOL_HINT = re.compile(r"^\s*(hint|help|note)\s*:.*`?--[a-z]", re.I)


@dataclass(frozen=True)
class NetFault:
    """One network failure: its kind (tls, proxy, dns, refused, timeout), the host, and what
    went wrong in a few words."""

    kind: str
    host: str
    what: str

    def line(self) -> str:
        """e.g. "mirror.lab:443: its TLS certificate is not trusted here"."""
        return f"{self.host}: {self.what}" if self.host else self.what

    def fix(self, mirror: str = "") -> str:
        """The setting that fixes it; `mirror`: where another mirror of the URL is named (the
        site config's `mirrors.git`, `--index NAME=URL`, ...), for a host that is not reached."""
        where = f"in your site config ({SITE_CONFIG})"
        if self.kind == "tls":
            signed = f" (the CA that signed {self.host}'s certificate)" if self.host else ""
            return f"set `network.ca_bundle: /path/to/ca.pem`{signed} {where}"
        if self.kind == "proxy":
            return f"check `network.proxy.https` (and `no_proxy` for local mirrors) {where}"
        other = f", or a mirror of it: {mirror}" if mirror else ""
        return f"behind a proxy, set `network.proxy.https` {where}{other}"


def net_fault(text: str | Iterable[str], url: str = "") -> NetFault | None:
    """The network failure `text` (a tool's output, or an exception's words) tells of, with the
    host it names (else `url`'s); None when it is not one."""
    words = text if isinstance(text, str) else "\n".join(text)
    for kind, what, pattern in _KINDS:
        found = re.search(pattern, words, re.I)
        if found:
            return NetFault(kind, _host(words) or _netloc(url), f"{what} ({_cause(found)})")
    return None


def without_tool_hints(lines: Iterable[str]) -> list[str]:
    """The lines of an installer's output without its hints that name its own flags."""
    return [line for line in lines if not _TOOL_HINT.match(line)]


def _cause(found: re.Match[str]) -> str:
    return found.group(0).strip()


def _host(text: str) -> str:
    """The first host the text names (no login, no path)."""
    for pattern in _HOST_PATTERNS:
        found = pattern.search(text)
        if found is None:
            continue
        if pattern.groups == 2:
            return f"{found[1]}:{found[2]}"
        return found[1] if pattern.groups else _netloc(found[0])
    return ""


def _netloc(url: str) -> str:
    """A URL's host[:port], without a login."""
    try:
        return urlsplit(url).netloc.rpartition("@")[2]
    except ValueError:
        return ""
