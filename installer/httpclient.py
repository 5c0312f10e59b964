"""Is a URL reachable? A short, proxy-aware probe used by the plan for its optional indexes.

It uses the standard library's HTTP client: `plan` runs it on every start, and importing
requests would cost more than the probe itself. Proxies come from the environment (HTTPS_PROXY,
HTTP_PROXY, ALL_PROXY, NO_PROXY), as doctor's network check reads them, and a CA bundle from
REQUESTS_CA_BUNDLE or SSL_CERT_FILE, as for pip and uv.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["reachable"]

TIMEOUT_SECONDS = 3.0


def reachable(url: str, *, timeout: float = TIMEOUT_SECONDS) -> bool:
    """True when `url` answers (any HTTP status below 500) or names an existing local path."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else url).exists()
    import ssl  # noqa: PLC0415 - only a remote URL needs the HTTP client
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE") or None
    try:
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler(_proxies()),  # NO_PROXY is checked by the handler
            urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=bundle)),
        )
        with opener.open(urllib.request.Request(url, method="HEAD"), timeout=timeout) as answer:
            return int(answer.status) < 500
    except urllib.error.HTTPError as answer:  # an HTTP status is an answer
        return answer.code < 500
    except (OSError, ValueError):  # no route, refused, timed out, TLS refused, unreadable CA file
        return False


def _proxies() -> dict[str, str]:
    """The environment's proxy per scheme; ALL_PROXY serves a scheme that has none of its own."""
    import urllib.request  # noqa: PLC0415

    found = urllib.request.getproxies()
    chosen = {scheme: found.get(scheme) or found.get("all") for scheme in ("http", "https")}
    return {scheme: proxy for scheme, proxy in chosen.items() if proxy}
