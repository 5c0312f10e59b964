"""Find, read, check and merge the site config files, remembering where each setting came from.

Files are merged lowest priority first: the system-wide file, the user's config dir,
$VERL_BOOTSTRAP_CONFIG, then --config. A later file's value replaces an earlier one key by key
(maps such as `mirrors.indexes` merge per entry); command-line flags override them all.
Values, and the locations of the files themselves, may name environment variables
(`${LAB_TOKEN}`) and `~`; relative paths are relative to the file that holds them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, unquote, urljoin, urlparse

from pydantic import ValidationError

from verl_bootstrap.errors import InputError, field_problems, said_of
from verl_bootstrap.httpclient import HttpError, fetch
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.shapes import control_char_at
from verl_bootstrap.safety.yamlfile import decode_untrusted, parse_yaml, read_untrusted
from verl_bootstrap.siteconfig.settings import SITE_SCHEMA_VERSION, SiteConfig, plain_http

__all__ = [
    "CONFIG_VARS",
    "ENV_VAR",
    "SYSTEM_CONFIG",
    "ConfigSource",
    "LoadedSite",
    "config_sources",
    "load_site",
    "read_location",
]

ENV_VAR = "VERL_BOOTSTRAP_CONFIG"
CONFIG_VARS = "VERL_BOOTSTRAP_CONFIG_VARS"  # what a config fetched by URL may read of yours
SYSTEM_CONFIG = Path("/etc/verl-bootstrap/config.yaml")
MAX_CONFIG_BYTES = 1024 * 1024
CONFIG_DEADLINE = 60.0  # seconds for a config fetched by URL, whole (a slow server is cut off)
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")
# Which settings hold locations, and how a relative one is resolved against its file.
_KINDS: dict[tuple[str, ...], str] = {
    ("mirrors", "pypi", "index_url"): "url",
    ("mirrors", "pypi", "extra_index_urls"): "url",
    ("mirrors", "pypi", "find_links"): "link",
    ("mirrors", "indexes", "*"): "url",
    ("mirrors", "pytorch", "*"): "url",
    ("mirrors", "git", "*"): "url",
    ("mirrors", "conda", "channel_alias"): "url",
    ("mirrors", "conda", "custom_channels", "*"): "url",
    ("network", "ca_bundle"): "path",
    ("caches", "uv"): "path",
    ("caches", "pip"): "path",
    ("caches", "conda"): "path",
    ("defaults", "lockfile"): "link",
    ("lockfiles",): "link",
    ("defaults", "profile"): "profile",  # a shipped profile's name, or the lab's own file
    ("defaults", "envs_dir"): "path",
}

Leaf = tuple[str, ...]


@dataclass(frozen=True)
class ConfigSource:
    """One place a site config may come from, and whether it was there."""

    label: str  # "system", "user", "$VERL_BOOTSTRAP_CONFIG", "--config"
    location: str
    found: bool


@dataclass(frozen=True)
class LoadedSite:
    """The merged settings, where each came from, and the raw text of the last file given."""

    config: SiteConfig
    origins: Mapping[Leaf, str] = field(default_factory=dict)  # setting -> "label location"
    sources: tuple[ConfigSource, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)  # --config (or the last) unexpanded
    location: str | None = None  # where that raw file came from

    @property
    def used(self) -> tuple[ConfigSource, ...]:
        """The sources that existed and were merged."""
        return tuple(s for s in self.sources if s.found)


def config_sources(
    cli: str | None,
    environ: Mapping[str, str],
    home: Path,
    *,
    system: Path = SYSTEM_CONFIG,
) -> list[ConfigSource]:
    """Every candidate, lowest priority first; an absent optional file is listed as not found."""
    user = Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "verl-bootstrap"
    found = [
        ConfigSource("system", str(system), system.is_file()),
        ConfigSource("user", str(user / "config.yaml"), (user / "config.yaml").is_file()),
    ]
    if environ.get(ENV_VAR):
        found.append(ConfigSource(f"${ENV_VAR}", environ[ENV_VAR], True))
    if cli:
        found.append(ConfigSource("--config", cli, True))
    return found


def load_site(
    cli: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    home: Path | None = None,
    system: Path = SYSTEM_CONFIG,
) -> LoadedSite:
    """Merge every site config that exists (none at all gives an empty config)."""
    env = dict(os.environ if environ is None else environ)
    sources = config_sources(cli, env, home or Path.home(), system=system)
    merged: dict[str, Any] = {"schema_version": SITE_SCHEMA_VERSION}
    origins: dict[Leaf, str] = {}
    raw: dict[str, Any] = {}
    for source in (s for s in sources if s.found):
        raw, data = _read_file(source, env, tuple(merged.get("trusted_http_hosts", ())))
        merged = _merge(merged, data, f"{source.label} {redact(source.location)}", origins)
    config = _validate(merged, "the merged site config")
    _check_http(config, origins)
    last = next((s.location for s in reversed(sources) if s.found), None)
    return LoadedSite(config, origins, tuple(sources), raw, last)


def read_location(location: str) -> tuple[str, str]:
    """The text at a path or URL, and the base that relative paths in it resolve against."""
    parsed = _parsed(location, "site config")
    if parsed.scheme in ("http", "https"):
        return _fetch(location), location
    path = Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(location).expanduser()
    if path.is_dir():
        raise InputError(
            f"site config {path} is a folder", hint="name the config file itself with --config"
        )
    text = read_untrusted(path, what="site config", max_bytes=MAX_CONFIG_BYTES)
    return text, str(path.resolve().parent)


def _parsed(value: str, what: str) -> ParseResult:
    """`value` split as a URL; one Python cannot split (`http://[::1`) is an InputError."""
    try:
        return urlparse(value)
    except ValueError as exc:
        raise InputError(
            f"{what} {redact(value)!r} is not a valid URL ({exc})",
            hint="write the URL whole, e.g. http://[::1]:8080/path",
        ) from None


def _fetch(url: str) -> str:
    try:
        # read no more than a config may hold (one byte over says it is too large)
        body = fetch(url, timeout=30, limit=MAX_CONFIG_BYTES + 1, deadline=CONFIG_DEADLINE)
    except HttpError as exc:
        raise InputError(
            f"cannot fetch site config {redact(url)}: {redact(str(exc))}",
            hint="check the URL, your proxy settings, and any credentials it needs",
            data={"url": redact(url), "timed_out": exc.timed_out},
        ) from None
    return decode_untrusted(body, name=redact(url), what="site config", max_bytes=MAX_CONFIG_BYTES)


def _check_http(config: SiteConfig, origins: Mapping[Leaf, str]) -> None:
    """A lab's lockfiles and wheelhouse come over https, from this machine, or from a plain-http
    host the merged config trusts (`trusted_http_hosts`)."""
    for key in ("lockfiles", "wheelhouse"):
        problem = plain_http(getattr(config, key) or "", config.trusted_http_hosts)
        if problem:
            raise InputError(
                f"{origins.get((key,), 'the site config')}: {key}: {problem}",
                hint="serve it over https, or name the host in the site config's "
                "trusted_http_hosts if the network to it is yours",
            )


def _read_file(
    source: ConfigSource, environ: Mapping[str, str], trusted: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the file's raw mapping, its checked, expanded and resolved mapping); a plain-http
    location must be trusted by a config read before it (one cannot vouch for itself)."""
    name = redact(source.location)
    # a location may name variables too (`https://u:${LAB_TOKEN}@lab/c.yaml`): no token in argv
    location = _expand(source.location, f"{source.label} {name}", environ)
    problem = plain_http(location, trusted)
    if problem:
        raise InputError(
            f"{source.label} {name}: {problem}",
            hint="serve it over https, copy it to a local file, or name the host in "
            "trusted_http_hosts of your own site config (~/.config/verl-bootstrap/config.yaml)",
        )
    text, base = read_location(location)
    raw = parse_yaml(text, Path(name), what="site config").data
    if not isinstance(raw, dict):
        raise InputError(f"{name}: a site config is a mapping with schema_version: 1")
    _check_version(raw, name)
    # a config from a URL is someone else's: it may not read your environment (a token, a key)
    # into the URLs preflight contacts; only your own files' variables are filled in
    allowed = _allowed(environ) if "://" in base else None
    expanded = _map_leaves(
        raw, lambda leaf, v: _expand(v, f"{name}: {'.'.join(leaf)}", environ, allowed=allowed)
    )
    _check_one_line(expanded, name)
    _map_leaves(expanded, lambda leaf, v: _parsed(v, f"{name}: {'.'.join(leaf)}").geturl())
    resolved = _map_leaves(expanded, lambda leaf, v: _resolve(v, _kind(leaf), base, name))
    _validate(resolved, name)
    return raw, resolved


def _check_one_line(data: Mapping[str, Any], name: str) -> None:
    """Every key and value of a site config is one line (its variables filled in): a line break
    in `index_url` would reach uv's command line as a flag of its own."""
    at = control_char_at(data, "")
    if at:
        raise InputError(
            f"{name}: {at.lstrip('.')} holds a line break or control character",
            hint="each setting is one line: a URL, a path or a name",
        )


def _validate(data: Mapping[str, Any], name: str) -> SiteConfig:
    _check_version(data, name)
    try:
        return SiteConfig.model_validate(data)
    except ValidationError as exc:
        problems = [{**p, "problem": redact(p["problem"])} for p in field_problems(exc.errors())]
        raise InputError(
            f"{name}: invalid site config: {said_of(problems)}",
            hint="every key is in docs/labs-and-clusters.md, section Site config",
            data={"file": name, "fields": problems},
        ) from None


def _check_version(data: Mapping[str, Any], name: str) -> None:
    version = data.get("schema_version")
    if version != SITE_SCHEMA_VERSION:
        raise InputError(
            f"{name}: site config schema_version {version!r} is not supported "
            f"(this verl-bootstrap reads {SITE_SCHEMA_VERSION})",
            hint="start the file with `schema_version: 1`",
        )


def _map_leaves(data: Any, fn: Callable[[Leaf, str], str], leaf: Leaf = ()) -> Any:
    """A copy of `data` with `fn` applied to every string (lists element by element)."""
    if isinstance(data, dict):
        return {k: _map_leaves(v, fn, (*leaf, str(k))) for k, v in data.items()}
    if isinstance(data, list):
        return [_map_leaves(v, fn, leaf) for v in data]
    return fn(leaf, data) if isinstance(data, str) else data


def _kind(leaf: Leaf) -> str | None:
    for pattern, kind in _KINDS.items():
        if len(pattern) == len(leaf) and all(
            p in ("*", k) for p, k in zip(pattern, leaf, strict=True)
        ):
            return kind
    return None


def _allowed(environ: Mapping[str, str]) -> frozenset[str]:
    """The variables you let a config fetched by URL read: $VERL_BOOTSTRAP_CONFIG_VARS."""
    return frozenset(v.strip() for v in environ.get(CONFIG_VARS, "").split(",") if v.strip())


def _expand(
    value: str, what: str, environ: Mapping[str, str], *, allowed: frozenset[str] | None = None
) -> str:
    """`value` with ${VAR} and $VAR filled in; an unset variable is an error naming `what`, and
    so is, in a config fetched from a URL, one you did not name in `allowed`."""

    def one(found: re.Match[str]) -> str:
        var = found["braced"] or found["bare"]
        if allowed is not None and var not in allowed:
            raise InputError(
                f"{what} names ${{{var}}}: a site config fetched from a URL reads only the "
                f"variables you name in ${CONFIG_VARS}",
                hint=f"export {CONFIG_VARS}={var} if you trust it with ${var}; or put the "
                "login in your ~/.netrc (sent to that host only)",
                data={"field": what, "variable": var, "cause": "not-allowed"},
            )
        if var not in environ:
            raise InputError(
                f"{what} names ${{{var}}}, which is not set",
                hint=f"export {var}=... before running verl-bootstrap",
                data={"field": what, "variable": var, "cause": "unset"},
            )
        return environ[var]

    return _VAR.sub(one, value)


def _resolve(value: str, kind: str | None, base: str, name: str) -> str:
    """A location made absolute: URLs kept, paths resolved against the file's folder."""
    if kind == "profile":
        kind = "link" if value.endswith((".yaml", ".yml")) else None
    if kind is None or "://" in value:
        return value
    if "://" in base:  # a config fetched from a URL: its relative links are relative to it
        if kind == "path" and not value.startswith(("/", "~")):
            raise InputError(f"{name}: {value!r} must be an absolute path in a config from a URL")
        return urljoin(base, value) if kind != "path" else str(Path(value).expanduser())
    path = Path(value).expanduser()
    path = path if path.is_absolute() else Path(base) / path
    return path.as_uri() if kind == "url" else str(path)


def _merge(
    base: dict[str, Any],
    layer: Mapping[str, Any],
    label: str,
    origins: dict[Leaf, str],
    at: Leaf = (),
) -> dict[str, Any]:
    """`layer` over `base`: maps merge key by key, anything else is replaced."""
    out = dict(base)
    for key, value in layer.items():
        here = (*at, str(key))
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value, label, origins, here)
            continue
        out[key] = value
        for stale in [k for k in origins if k[: len(here)] == here]:
            del origins[stale]
        origins.update(dict.fromkeys(_leaf_paths(value, here), label))
    return out


def _leaf_paths(value: Any, at: Leaf) -> Iterator[Leaf]:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _leaf_paths(inner, (*at, str(key)))
    else:
        yield at
