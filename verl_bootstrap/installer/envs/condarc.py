"""The user's conda settings (.condarc): which channels to use and where channel names point.

Only the keys that decide channel URLs are read: `channels`, `default_channels`,
`channel_alias` and `custom_channels`. Files are read in conda's order of increasing priority;
a later file's scalars and lists replace earlier ones, and `custom_channels` maps are merged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.safety.yamlfile import load_yaml

__all__ = [
    "DEFAULT_CHANNEL_ALIAS",
    "CondaSettings",
    "channel_url",
    "channel_urls",
    "condarc_paths",
    "is_url",
    "load_condarc",
    "looks_like_path",
    "read_condarc",
]

DEFAULT_CHANNEL_ALIAS = "https://conda.anaconda.org"
# What conda means by the `defaults` channel when .condarc does not say.
_DEFAULT_CHANNELS = ("https://repo.anaconda.com/pkgs/main", "https://repo.anaconda.com/pkgs/r")
# Used when neither the request nor .condarc names a channel.
_FALLBACK_CHANNELS = ("conda-forge",)


@dataclass(frozen=True)
class CondaSettings:
    """Channel settings merged from the .condarc files that exist."""

    channels: tuple[str, ...] = ()
    default_channels: tuple[str, ...] = _DEFAULT_CHANNELS
    channel_alias: str = DEFAULT_CHANNEL_ALIAS
    custom_channels: Mapping[str, str] = field(default_factory=dict)
    sources: tuple[Path, ...] = ()  # the files these settings came from


def condarc_paths(env: Mapping[str, str], home: Path, *, etc: Path = Path("/etc")) -> list[Path]:
    """Candidate .condarc files, lowest priority first (the system file, the user's, $CONDARC)."""
    config_home = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    paths = [
        etc / "conda" / ".condarc",
        etc / "conda" / "condarc",
        config_home / "conda" / ".condarc",
        home / ".conda" / ".condarc",
        home / ".condarc",
    ]
    if env.get("CONDARC"):
        paths.append(Path(env["CONDARC"]).expanduser())
    return paths


def load_condarc(env: Mapping[str, str] | None = None, home: Path | None = None) -> CondaSettings:
    """The settings from this user's .condarc files (none existing gives the defaults)."""
    env = os.environ if env is None else env
    return read_condarc(condarc_paths(env, home or Path.home()))


def read_condarc(paths: Sequence[Path]) -> CondaSettings:
    """Merge the .condarc files among `paths` that exist, later ones winning."""
    settings = CondaSettings()
    for path in paths:
        if path.is_file():
            settings = _merge(settings, _parse(path), path)
    return settings


def channel_urls(channels: Sequence[str], settings: CondaSettings) -> tuple[str, ...]:
    """URLs for `channels`; with none given, the .condarc channels, else conda-forge."""
    names = tuple(channels) or settings.channels or _FALLBACK_CHANNELS
    urls: list[str] = []
    for name in names:
        expanded = settings.default_channels if name == "defaults" else (name,)
        urls.extend(channel_url(one, settings) for one in expanded)
    return tuple(dict.fromkeys(urls))  # keep order, drop repeats


def channel_url(channel: str, settings: CondaSettings) -> str:
    """The URL of one channel: a URL is kept, a folder becomes file://, a name is mapped."""
    if is_url(channel):
        return channel.rstrip("/")
    if looks_like_path(channel):
        return Path(channel).expanduser().absolute().as_uri()
    name = channel.strip("/")
    base = settings.custom_channels.get(name.split("/", 1)[0], settings.channel_alias)
    return f"{base.rstrip('/')}/{name}"


def is_url(channel: str) -> bool:
    """`channel` carries a scheme (https://, file://, s3://, ...)."""
    return "://" in channel


def looks_like_path(channel: str) -> bool:
    """`channel` is written as a local folder (absolute, ~, or ./ and ../ relative)."""
    return channel.startswith(("/", "~", "./", "../")) or channel in {".", ".."}


def _parse(path: Path) -> dict[str, Any]:
    data = load_yaml(path, what="conda settings file").data  # bounded, like every input file
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"conda settings {path} must be a mapping, not {type(data).__name__}")
    return data


def _merge(settings: CondaSettings, data: Mapping[str, Any], path: Path) -> CondaSettings:
    custom = dict(settings.custom_channels)
    custom.update(_str_map(data.get("custom_channels", {}), "custom_channels", path))
    default = _str_list(data.get("default_channels"), "default_channels", path)
    alias = data.get("channel_alias", settings.channel_alias)
    if not isinstance(alias, str):
        raise InputError(f"channel_alias in {path} must be a URL string")
    return CondaSettings(
        channels=_str_list(data.get("channels"), "channels", path) or settings.channels,
        default_channels=default or settings.default_channels,
        channel_alias=alias,
        custom_channels=custom,
        sources=(*settings.sources, path),
    )


def _str_list(value: object, key: str, path: Path) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{key} in {path} must be a list of strings")
    return tuple(value)


def _str_map(value: object, key: str, path: Path) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InputError(f"{key} in {path} must map channel names to URLs")
    return dict(value)
