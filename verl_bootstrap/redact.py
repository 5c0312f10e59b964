"""Secrets never leave the process: credentials are masked everywhere we print or store text.

Three kinds are masked: the userinfo of any scheme://user:password@ URL; the value of any query
parameter whose name says it is a secret (token, key, secret, password, signature, auth, ...);
and tokens whose shape gives them away wherever they appear (Hugging Face hf_…, GitHub ghp_…
and github_pat_…, GitLab glpat-…, Slack xox…-, AWS access key ids, `Authorization:` headers).
"""

from __future__ import annotations

import re

__all__ = ["redact", "redact_args"]

MASK = "***"
# user:password@ or token@ in any scheme://… URL, including git+https and file-less forms.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
# ?access_token=…, &X-Amz-Signature=…, &sig=…, &apikey=…: a parameter named like a secret.
_QUERY = re.compile(
    r"(?P<key>[?&;][^=&\s#]*?(?:token|key|secret|passw(?:or)?d|pwd|signature|sig|auth|"
    r"credential)[^=&\s#]*=)[^&\s#'\"]+",
    re.I,
)
# Tokens that name themselves by their prefix.
_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,})"
)
_HEADER = re.compile(r"(?P<name>\bauthorization\s*:\s*(?:basic|bearer|token)?\s*)\S+", re.I)


def redact(text: str) -> str:
    """Mask every credential in `text`."""
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = _QUERY.sub(lambda m: f"{m['key']}{MASK}", text)
    text = _HEADER.sub(lambda m: f"{m['name']}{MASK}", text)
    return _SHAPES.sub(MASK, text)


def redact_args(args: list[str] | tuple[str, ...]) -> list[str]:
    """Mask credentials in each argument of a command line."""
    return [redact(a) for a in args]
