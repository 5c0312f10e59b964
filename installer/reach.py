"""Is a URL reachable? A short, proxy-aware probe used by the plan for its optional indexes.

It uses the standard library's HTTP client: `plan` runs it on every start, and importing
requests would cost more than the probe itself. Proxies come from the environment (HTTPS_PROXY,
HTTP_PROXY, NO_PROXY), and a CA bundle from REQUESTS_CA_BUNDLE or SSL_CERT_FILE, as for pip and uv.
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
            urllib.request.ProxyHandler(),  # the environment's proxies, NO_PROXY included
            urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=bundle)),
        )
        with opener.open(urllib.request.Request(url, method="HEAD"), timeout=timeout) as answer:
            return int(answer.status) < 500
    except urllib.error.HTTPError as answer:  # an HTTP status is an answer
        return answer.code < 500
    except (OSError, ValueError):  # no route, refused, timed out, TLS refused, unreadable CA file
        return False
