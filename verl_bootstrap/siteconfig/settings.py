"""Pydantic models of a site config file (schema version 1): a lab's mirrors, network and caches.

Strict like profiles: unknown keys are errors and `schema_version` is required. Every field is
optional, because a file may set only what it changes; later files override earlier ones.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, field_validator

from verl_bootstrap.redact import redact
from verl_bootstrap.safety.shapes import is_loopback

__all__ = [
    "SITE_SCHEMA_VERSION",
    "Caches",
    "CondaMirror",
    "Defaults",
    "Mirrors",
    "Network",
    "Proxy",
    "PypiMirror",
    "SiteConfig",
    "plain_http",
]

SITE_SCHEMA_VERSION = 1
_CUDA_ARCH = re.compile(r"^[0-9]{1,2}\.[0-9][af]?$")


def check_cuda_arch(value: str) -> str:
    """A compute capability as builds read it: '9.0', '10.0', '9.0a'."""
    if not _CUDA_ARCH.match(value):
        msg = f"{value!r} is not a CUDA architecture (write it like '9.0' or '10.0')"
        raise ValueError(msg)
    return value


_VARIANT = re.compile(r"^(cpu|cu1[0-9]{2})$")
_INDEX_SCHEMES = ("http", "https", "file")
_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def plain_http(url: str, trusted: tuple[str, ...]) -> str | None:
    """Why `url` may not be fetched (None: it may): plain http to a host neither on this machine
    (loopback) nor named in the site config's `trusted_http_hosts`. What it serves (a lockfile,
    a wheelhouse, a config) decides what runs, and plain http lets anyone on the path change it."""
    try:
        parsed = urlparse(url)
        host = (parsed.hostname or "").lower()
    except ValueError:  # not a URL at all: the field's own check says so
        return None
    if parsed.scheme != "http":
        return None
    if is_loopback(url) or host in {h.lower() for h in trusted}:
        return None
    return (
        f"{redact(url)} is plain http to {host or 'no host'}, which the site config does not trust"
    )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_url(value: str, schemes: tuple[str, ...] = _INDEX_SCHEMES) -> str:
    scheme = urlparse(value).scheme
    if scheme not in schemes:
        msg = f"{value!r} is not a URL ({' or '.join(schemes)}) nor a local folder"
        raise ValueError(msg)
    return value


class PypiMirror(_Strict):
    """The Python package index and its companions (pip's and uv's settings)."""

    index_url: str | None = Field(default=None, description="Replaces the default index (PyPI).")
    extra_index_urls: tuple[str, ...] | None = None
    find_links: tuple[str, ...] | None = Field(
        default=None, description="Folders or URLs of wheel files (pip's and uv's --find-links)."
    )

    @field_validator("index_url")
    @classmethod
    def _index(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value)

    @field_validator("extra_index_urls")
    @classmethod
    def _extras(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(_check_url(v) for v in value)


class CondaMirror(_Strict):
    """Conda channels: where channel names point (py-rattler, conda, mamba, micromamba)."""

    channel_alias: str | None = Field(
        default=None, description="Base URL that channel names resolve under."
    )
    custom_channels: dict[str, str] = Field(
        default_factory=dict, description="Per-channel base URLs (the channel name is appended)."
    )
    channels: tuple[str, ...] | None = Field(
        default=None, description="Channels used when neither the profile nor --channel names any."
    )

    @field_validator("channel_alias")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value)

    @field_validator("custom_channels")
    @classmethod
    def _custom(cls, value: dict[str, str]) -> dict[str, str]:
        return {name: _check_url(url) for name, url in value.items()}


class Mirrors(_Strict):
    """One mirrors block, translated for uv, pip, py-rattler/conda and git."""

    pypi: PypiMirror = PypiMirror()
    indexes: dict[str, str] = Field(
        default_factory=dict, description="Profile index name -> URL (like --index NAME=URL)."
    )
    pytorch: dict[str, str] = Field(
        default_factory=dict, description="CUDA variant (cpu, cu128, ...) -> its PyTorch index."
    )
    conda: CondaMirror = CondaMirror()
    git: dict[str, str] = Field(
        default_factory=dict,
        description="URL prefix -> mirror prefix, applied to every git URL (git's insteadOf).",
    )

    @field_validator("indexes")
    @classmethod
    def _indexes(cls, value: dict[str, str]) -> dict[str, str]:
        if "default" in value:
            msg = "set the default index with mirrors.pypi.index_url, not indexes.default"
            raise ValueError(msg)
        return {name: _check_url(url) for name, url in value.items()}

    @field_validator("pytorch")
    @classmethod
    def _pytorch(cls, value: dict[str, str]) -> dict[str, str]:
        for variant in value:
            if not _VARIANT.match(variant):
                msg = f"{variant!r} is not a CUDA variant (cpu, cu118, cu128, cu130, ...)"
                raise ValueError(msg)
        return {variant: _check_url(url) for variant, url in value.items()}


class Proxy(_Strict):
    """Proxies every backend honours (HTTP_PROXY, HTTPS_PROXY, NO_PROXY)."""

    http: str | None = None
    https: str | None = None
    no_proxy: tuple[str, ...] | None = Field(default=None, description="Hosts reached directly.")

    @field_validator("http", "https")
    @classmethod
    def _proxy(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value, _PROXY_SCHEMES)


class Network(_Strict):
    """How the network is reached: proxies and the CA bundle that signs the lab's mirrors."""

    proxy: Proxy = Proxy()
    ca_bundle: str | None = Field(default=None, description="A PEM file of trusted CAs.")


class Caches(_Strict):
    """Shared package caches (a folder per tool)."""

    uv: str | None = None
    pip: str | None = None
    conda: str | None = Field(default=None, description="Conda package cache (py-rattler/conda).")


class Defaults(_Strict):
    """What a run uses when the command line does not say."""

    profile: str | None = Field(
        default=None, description="A shipped profile's name, or a profile file's path or URL."
    )
    lockfile: str | None = Field(default=None, description="A lockfile path or URL.")
    envs_dir: str | None = Field(default=None, description="Where envs go without --prefix.")
    cuda_arch: tuple[str, ...] | None = Field(
        default=None,
        description="GPU architectures a kernel source build compiles for when the host shows "
        "no GPU (a login node), e.g. ['9.0']; --cuda-arch overrides it.",
    )

    @field_validator("cuda_arch")
    @classmethod
    def _archs(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(check_cuda_arch(v) for v in value)


class SiteConfig(_Strict):
    """A whole site config file (or several, merged)."""

    schema_version: Literal[1]
    mirrors: Mirrors = Mirrors()
    network: Network = Network()
    caches: Caches = Caches()
    defaults: Defaults = Defaults()
    lockfiles: str | None = Field(
        default=None,
        description="The lab's lockfiles: a folder (or an http(s) URL serving one) laid out as "
        "the shipped lockfiles/ (PROFILE/VARIANT-PLATFORM.lock.yaml). A run installs the lab's "
        "lockfile when it fits, before the shipped one.",
    )
    wheelhouse: str | None = Field(
        default=None,
        description="The lab wheelhouse: a folder (on a shared filesystem) where every kernel "
        "wheel the tool builds is published and looked up, or an http(s) URL serving such a "
        "folder, which is only read (default: $VERL_BOOTSTRAP_HOME/wheelhouse).",
    )

    trusted_http_hosts: tuple[str, ...] = Field(
        default=(),
        description="Hosts whose plain-http URLs the tool may fetch a lab's lockfiles, "
        "wheelhouse or a later site config from (https, and this machine's loopback, need no "
        "entry).",
    )

    kernel_sources: tuple[str, ...] | None = Field(
        default=None,
        description="The prebuilt kernel sources a kernel stage may take, in this order: "
        "'wheelhouse' (the lab's) and the ids the profiles declare (official, verl-wheelhouse, "
        "community). A source left out is off; unset: every declared source, most trusted first.",
    )

    @field_validator("kernel_sources")
    @classmethod
    def _kernel_sources(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for name in value or ():
            if not name or not all(c.isalnum() or c == "-" for c in name):
                raise ValueError(f"{name!r}: a source id is letters, digits and '-'")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("a source is named twice")
        return value

    @field_validator("wheelhouse")
    @classmethod
    def _wheelhouse(cls, value: str | None) -> str | None:
        remote = ("file://", "https://", "http://")
        if value is not None and "://" in value and not value.startswith(remote):
            msg = f"{redact(value)!r}: the wheelhouse must be a folder or an http(s) URL"
            raise ValueError(msg)
        return value
