"""Credentials leave every child's command line: they travel in its environment and a private netrc.

A process's argv is readable by every user of the machine (`ps`, /proc/PID/cmdline); its
environment and a 0600 file are not. So before any child starts (verl_bootstrap.proc), each URL in
its argv that carries `user:password@` loses it, and the child is given the same credentials the
way each tool documents:
- uv and pip (and the requests library) read a netrc file named by $NETRC; ours holds the lifted
  credentials after the user's own netrc (the last entry for a host wins), in a private folder
  removed when the child ends;
- git (a clone, or the git that pip or uv call for a `git+` requirement) gets an
  `http.<url>.extraHeader` with the Basic authorization through GIT_CONFIG_COUNT/KEY/VALUE.
A URL whose secret is in its query string or path travels whole in the environment instead
(verl_bootstrap.safety.secreturls).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from verl_bootstrap.safety.secreturls import move_secret_urls

__all__ = [
    "Credential",
    "Lifted",
    "git_auth_settings",
    "git_config_env",
    "lift",
    "split_url",
]

_URL_ARG = re.compile(
    r"^(?P<head>(?:--?[A-Za-z0-9-]+=|[A-Za-z0-9_.-]+=|[A-Za-z0-9_.\[\], -]+@ ?)?)"
    r"(?P<url>[A-Za-z][A-Za-z0-9+.-]*://\S+)$"
)


@dataclass(frozen=True)
class Credential:
    """A login for one scheme://host:port."""

    scheme: str
    host: str
    port: int | None
    username: str
    password: str

    @property
    def base(self) -> str:
        """scheme://host[:port]/, the prefix git matches its per-URL settings against."""
        netloc = f"{self.host}:{self.port}" if self.port else self.host
        return f"{self.scheme}://{netloc}/"


def split_url(url: str) -> tuple[str, Credential | None]:
    """(`url` without its userinfo, the credential it held); a URL without one is kept as it is."""
    prefix, sep, rest = url.partition("://")
    if not sep or "@" not in rest.split("/", 1)[0]:
        return url, None
    scheme = prefix.rsplit("+", 1)[-1].lower()  # git+https -> https
    parts = urlsplit(f"{scheme}://{rest}")
    if parts.hostname is None or scheme not in ("http", "https"):
        return url, None
    netloc = parts.netloc.rsplit("@", 1)[1]
    # a bare token as the user name (https://TOKEN@host) is sent as `TOKEN:`, as git and curl do
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    clean = f"{prefix}://{urlunsplit(('', netloc, parts.path, parts.query, parts.fragment))[2:]}"
    return clean, Credential(scheme, parts.hostname, parts.port, user, password)


@dataclass
class Lifted:
    """A child's argv without credentials, what its environment gains, and what to clean up."""

    argv: list[str]
    env: dict[str, str]
    folder: Path | None = None

    def cleanup(self) -> None:
        """Remove the private netrc (call when the child has ended)."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def lift(args: Sequence[str], environ: Mapping[str, str]) -> Lifted:
    """`args` with every URL's userinfo removed, and the environment that carries it instead;
    a URL with another kind of secret moves into the environment whole (safety.secreturls)."""
    moved, git_settings, env = move_secret_urls(args, environ)
    argv, found = [], []
    for arg in moved:
        clean, cred = _split_arg(arg)
        argv.append(clean)
        found.extend(cred)
    if not found:
        if git_settings:
            env.update(git_config_env(git_settings, environ))
        return Lifted(argv=argv, env=env)
    folder = Path(tempfile.mkdtemp(prefix="verl-bootstrap-auth-"))  # 0700
    netrc = folder / "netrc"
    _write_private(netrc, _user_netrc(environ) + _netrc_lines(found))
    env.update(git_config_env([*git_settings, *git_auth_settings(found)], environ))
    return Lifted(argv=argv, env={"NETRC": str(netrc), **env}, folder=folder)


def _split_arg(arg: str) -> tuple[str, list[Credential]]:
    """An argument that is a URL, or `--flag=URL`, `NAME=URL`, `name @ URL`; any other argument
    (a script's text, say) is left alone."""
    found = _URL_ARG.match(arg) if "@" in arg else None
    if found is None:
        return arg, []
    clean, cred = split_url(found["url"])
    return found["head"] + clean, [cred] if cred else []


def _netrc_lines(found: list[Credential]) -> str:
    lines = [
        f"machine {c.host} login {c.username}" + (f" password {c.password}" if c.password else "")
        for c in found
    ]
    return "\n".join(lines) + "\n"


def _user_netrc(environ: Mapping[str, str]) -> str:
    """The user's own netrc, so that its other logins keep working for this child."""
    path = Path(environ.get("NETRC") or Path(environ.get("HOME", "~")).expanduser() / ".netrc")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    return text if text.endswith("\n") or not text else text + "\n"


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def git_auth_settings(found: Sequence[Credential]) -> list[tuple[str, str]]:
    """git settings that send each credential as a Basic Authorization header to its host."""
    settings = []
    for cred in {c.base: c for c in found}.values():
        token = base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()
        settings.append((f"http.{cred.base}.extraHeader", f"Authorization: Basic {token}"))
    return settings


def git_config_env(
    settings: Sequence[tuple[str, str]], environ: Mapping[str, str]
) -> dict[str, str]:
    """`settings` as GIT_CONFIG_COUNT/KEY/VALUE, after any GIT_CONFIG_* already in `environ`."""
    try:
        start = int(environ.get("GIT_CONFIG_COUNT") or 0)
    except ValueError:
        start = 0
    env = {"GIT_CONFIG_COUNT": str(start + len(settings))}
    for offset, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{start + offset}"] = key
        env[f"GIT_CONFIG_VALUE_{start + offset}"] = value
    return env
