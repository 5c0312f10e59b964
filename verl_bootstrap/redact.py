"""Secrets never leave the process: credentials are masked everywhere we print or store text.

Three kinds are masked: the userinfo of any scheme://user:password@ URL; the value of any query
parameter whose name says it is a secret (token, key, secret, password, signature, auth, ...);
and tokens whose shape gives them away wherever they appear (Hugging Face hf_…, GitHub ghp_…
and github_pat_…, GitLab glpat-…, Slack xox…-, AWS access key ids, `Authorization:` headers).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "drop_login",
    "holds_secret",
    "redact",
    "redact_args",
    "redact_data",
    "secrets_in",
    "shareable",
]

MASK = "***"
# user:password@ or token@ in any scheme://… URL, including git+https and file-less forms.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
# ?access_token=…, &X-Amz-Signature=…, &sig=…, &apikey=…: a parameter named like a secret.
_QUERY = re.compile(
    r"(?P<key>[?&;][^=&\s#]*?(?:token|key|secret|passw(?:or)?d|pwd|signature|sig|auth|"
    r"credential)[^=&\s#]*=)(?P<value>[^&\s#'\"]+)",
    re.I,
)
# Tokens that name themselves by their prefix.
_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,})"
)
_HEADER = re.compile(
    r"(?P<name>\bauthorization\s*:\s*(?:basic|bearer|token)?\s*)(?P<value>\S+)", re.I
)
# Schemes whose userinfo is a login the user's netrc can supply instead.
_NETRC_SCHEMES = re.compile(r"^(?:git\+)?https?://$", re.I)


# `${LAB_TOKEN}` or `$LAB_TOKEN`: a reference a shell or the site config fills in, not a secret.
_REFERENCE = re.compile(r"\$(?:\{[A-Za-z_]\w*\}|[A-Za-z_]\w*)")


def redact(text: str) -> str:
    """Mask every credential in `text` (a variable reference standing for one is kept)."""
    text = _USERINFO.sub(
        lambda m: (
            m[0]
            if _reference(m["userinfo"].partition(":")[2] or m["userinfo"])
            else f"{m['scheme']}{MASK}@"
        ),
        text,
    )
    text = _QUERY.sub(lambda m: m[0] if _reference(m["value"]) else f"{m['key']}{MASK}", text)
    text = _HEADER.sub(lambda m: m[0] if _reference(m["value"]) else f"{m['name']}{MASK}", text)
    return _SHAPES.sub(MASK, text)


def redact_data(value: Any) -> Any:
    """JSON-ready data with every string in it masked: a dict's values, a list's or tuple's items
    (as a list); a number, bool or None as it is; any other object (a path) as its text, masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redact(str(value))


def _reference(value: str) -> bool:
    return _REFERENCE.fullmatch(value) is not None


def redact_args(args: list[str] | tuple[str, ...]) -> list[str]:
    """Mask credentials in each argument of a command line."""
    return [redact(a) for a in args]


def secrets_in(text: str) -> list[str]:
    """Every credential `redact` would mask in `text`, as written there (a password of a
    `user:password@`, the whole userinfo when it has no password, a secret query value, ...)."""
    found = [m["userinfo"].partition(":")[2] or m["userinfo"] for m in _USERINFO.finditer(text)]
    found += [m["value"] for m in _QUERY.finditer(text)]
    found += [m["value"] for m in _HEADER.finditer(text)]
    return found + _SHAPES.findall(text)


def holds_secret(text: str) -> bool:
    """`text` holds something `redact` masks."""
    return redact(text) != text


def shareable(text: str) -> str:
    """`text` as a file meant to be shared or run again records it: the userinfo of an http(s)
    URL is dropped (pip, uv, git and this tool take the login for the host from the netrc), any
    other credential is masked."""
    return redact(drop_login(text))


def drop_login(text: str) -> str:
    """`text` without the userinfo of its http(s) URLs: the netrc supplies the login."""
    return _USERINFO.sub(lambda m: m["scheme"] if _NETRC_SCHEMES.match(m["scheme"]) else m[0], text)
