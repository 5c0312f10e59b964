"""Is a URL reachable? A short, proxy-aware probe used by the plan and by doctor."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["reachable"]

TIMEOUT_SECONDS = 3.0


def reachable(url: str, *, timeout: float = TIMEOUT_SECONDS) -> bool:
    """True when `url` answers (any HTTP status below 500) or names an existing local path."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else url).exists()
    import requests  # noqa: PLC0415 - requests is slow to import; most runs never probe

    try:
        answer = requests.head(url, timeout=timeout, allow_redirects=True)
    except requests.RequestException:
        return False
    return answer.status_code < 500
