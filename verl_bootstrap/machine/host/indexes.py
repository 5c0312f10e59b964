"""Package indexes: the user's pip settings carried over to uv, plus the profile's named indexes.

uv reads no pip configuration, yet labs put their mirrors in pip.conf and PIP_* variables. We read
them the way pip does and hand them to uv explicitly, with pip's "best match across all indexes"
strategy, so a uv install sees exactly what pip would.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from verl_bootstrap.errors import InputError
from verl_bootstrap.safety.shapes import has_control_char

__all__ = ["DEFAULT", "IndexSettings", "parse_index_flags", "read_pip_settings"]

DEFAULT = "default"  # the name lockfiles use for the default index (whatever the user configured)
_SECTIONS = ("global", "install")


@dataclass(frozen=True)
class IndexSettings:
    """Where packages come from. `named` maps profile index names to URLs (None: the default)."""

    index_url: str | None = None  # None: the installer's own default index
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    named: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)  # setting -> where it came from

    def with_named(self, names: Mapping[str, str]) -> IndexSettings:
        """These settings with more named indexes (later names win)."""
        merged = {**self.named, **names}
        index_url = merged.pop(DEFAULT, self.index_url)
        return replace(self, named=merged, index_url=index_url)

    def url_of(self, name: str) -> str | None:
        """The URL behind an index name; None means the default index."""
        if name == DEFAULT:
            return self.index_url
        return self.named.get(name)


def parse_index_flags(flags: tuple[str, ...]) -> dict[str, str]:
    """`--index NAME=URL` flags as a mapping; a malformed flag is an InputError."""
    out: dict[str, str] = {}
    for flag in flags:
        if has_control_char(flag):  # a line break would reach uv's command line as its own flag
            raise InputError(
                f"--index {flag!r}: holds a line break or control character",
                hint="one NAME=URL per --index flag",
            )
        name, sep, url = flag.partition("=")
        if not sep or not name or not url:
            raise InputError(
                f"--index {flag!r}: expected NAME=URL",
                hint="e.g. --index pytorch-cpu=https://mirror.example/whl/cpu, or "
                "--index default=URL to replace the default index",
            )
        out[name.strip()] = _as_url(url.strip())
    return out


def read_pip_settings(
    environ: Mapping[str, str] | None = None, *, home: Path | None = None
) -> IndexSettings:
    """pip's index-url, extra-index-url, find-links and constraint, resolved as pip does.

    Files are read in pip's order (site-wide, user, virtualenv, PIP_CONFIG_FILE), then the PIP_*
    variables override them.
    """
    env = dict(os.environ if environ is None else environ)
    values: dict[str, tuple[str, str]] = {}
    for path in _config_files(env, home or Path.home()):
        values.update(_read_file(path))
    for key in ("index-url", "extra-index-url", "find-links", "constraint"):
        var = "PIP_" + key.upper().replace("-", "_")
        if env.get(var):
            values[key] = (env[var], f"${var}")
    return _to_settings(values)


def _config_files(env: Mapping[str, str], home: Path) -> list[Path]:
    if env.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    xdg_dirs = env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":")
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs) if d]
    files.append(Path("/etc/pip.conf"))
    files.append(home / ".pip" / "pip.conf")
    files.append(Path(env.get("XDG_CONFIG_HOME", home / ".config")) / "pip" / "pip.conf")
    if env.get("VIRTUAL_ENV"):
        files.append(Path(env["VIRTUAL_ENV"]) / "pip.conf")
    if env.get("PIP_CONFIG_FILE"):
        files.append(Path(env["PIP_CONFIG_FILE"]))
    return [f for f in files if f.is_file()]


def _read_file(path: Path) -> dict[str, tuple[str, str]]:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise InputError(f"{path}: cannot parse pip config: {exc}") from exc
    out: dict[str, tuple[str, str]] = {}
    for section in _SECTIONS:
        if parser.has_section(section):
            for key, value in parser.items(section):
                out[key.replace("_", "-")] = (value, str(path))
    return out


def _split(value: str) -> tuple[str, ...]:
    return tuple(v for v in value.split() if v)


def _to_settings(values: Mapping[str, tuple[str, str]]) -> IndexSettings:
    def get(key: str) -> tuple[str, ...]:
        return _split(values[key][0]) if key in values else ()

    index = get("index-url")
    return IndexSettings(
        index_url=index[0] if index else None,
        extra_index_urls=get("extra-index-url"),
        find_links=get("find-links"),
        constraints=get("constraint"),
        sources={key: origin for key, (_, origin) in values.items()},
    )


def _as_url(value: str) -> str:
    """A local folder becomes a file:// URL; anything with a scheme is kept, if it parses."""
    if "://" in value:
        try:
            _ = urlsplit(value).port  # the host and port are read only when asked for
        except ValueError as exc:
            raise InputError(f"--index URL {value!r} is not a URL ({exc})") from None
        return value
    path = Path(value).expanduser()
    if not path.exists():
        raise InputError(f"index {value!r} is neither a URL nor an existing folder")
    return path.resolve().as_uri()
