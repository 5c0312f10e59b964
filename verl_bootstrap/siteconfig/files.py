"""Lab files a site config names (a lockfile, the lab's own profile), fetched when URLs."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlparse

from verl_bootstrap.errors import InputError
from verl_bootstrap.siteconfig.siteload import LoadedSite, read_location

__all__ = ["fetch_file", "local_profile", "site_lockfile"]


def fetch_file(location: str, environ: Mapping[str, str], what: str) -> Path:
    """A local copy of a lab file (a lockfile, a profile): URLs go to the user's cache."""
    parsed = urlparse(location)
    if parsed.scheme not in ("http", "https"):
        path = Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(location)
        if not path.is_file():
            raise InputError(f"{what} {path} does not exist", hint="check the lab config")
        return path.absolute()
    text, _ = read_location(location)
    home = Path(environ.get("HOME") or Path.home())
    cache = Path(environ.get("XDG_CACHE_HOME") or home / ".cache") / "verl-bootstrap" / "site"
    folder = cache / hashlib.sha256(text.encode()).hexdigest()[:12]
    path = folder / (Path(parsed.path).name or f"lab-{what}.yaml")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def local_profile(profile: str, environ: Mapping[str, str]) -> str:
    """A shipped profile's name as is; a profile file (path or URL) as a local path."""
    if not profile.endswith((".yaml", ".yml")):
        return profile
    return str(fetch_file(profile, environ, "profile"))


def site_lockfile(site: LoadedSite, environ: Mapping[str, str]) -> Path | None:
    """The site config's default lockfile, as a local file (None when it names none)."""
    location = site.config.defaults.lockfile
    return fetch_file(location, environ, "lockfile") if location else None
