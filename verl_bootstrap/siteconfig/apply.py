"""Applying the site config to a run: indexes (over pip's settings, under the profile's and the
--index flags), PyTorch mirrors, and the backends' variables."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from verl_bootstrap.httpclient import reachable
from verl_bootstrap.machine.host.indexes import IndexSettings, read_pip_settings
from verl_bootstrap.options import RunOptions, SiteOptions
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.urlmatch import url_remainder

__all__ = [
    "PYTORCH_INDEX",
    "applied_environment",
    "apply_site_indexes",
    "index_settings",
    "pytorch_mirrors",
]

PYTORCH_INDEX = "https://download.pytorch.org/whl/"


def apply_site_indexes(settings: IndexSettings, site: SiteOptions) -> IndexSettings:
    """pip's settings with the site config's index, extra indexes and find-links over them."""
    origins = dict(settings.sources)
    for key, value in (
        ("index-url", site.index_url),
        ("extra-index-url", site.extra_index_urls),
        ("find-links", site.find_links),
    ):
        if value is not None:
            origins[key] = site.origin or "site config"
    return replace(
        settings,
        index_url=settings.index_url if site.index_url is None else site.index_url,
        extra_index_urls=_either(site.extra_index_urls, settings.extra_index_urls),
        find_links=_either(site.find_links, settings.find_links),
        sources=origins,
    )


def _either(site: tuple[str, ...] | None, pip: tuple[str, ...]) -> tuple[str, ...]:
    return pip if site is None else site


def pytorch_mirrors(indexes: Mapping[str, str], site: SiteOptions) -> dict[str, str]:
    """Profile indexes on download.pytorch.org/whl/VARIANT that the site mirrors, to the mirror."""
    mirrors = dict(site.pytorch)
    out: dict[str, str] = {}
    for name, url in indexes.items():
        rest = [part for part in url_remainder(url, PYTORCH_INDEX) or () if part]
        if len(rest) == 1 and rest[0] in mirrors:
            out[name] = mirrors[rest[0]]
    return out


def index_settings(
    profile: Profile,
    options: RunOptions,
    *,
    environ: Mapping[str, str] | None = None,
    check_optional: bool = True,
) -> tuple[IndexSettings, list[str]]:
    """pip's settings, the profile's named indexes, then --index overrides (the last wins)."""
    settings = apply_site_indexes(read_pip_settings(environ), options.site)
    profile_urls = {name: spec.url for name, spec in profile.indexes.items()}
    overrides = {**pytorch_mirrors(profile_urls, options.site), **dict(options.indexes)}
    named: dict[str, str] = {}
    notes: list[str] = []
    for name, spec in profile.indexes.items():
        url = overrides.get(name, spec.url)
        if spec.optional and name not in overrides and check_optional and not reachable(url):
            notes.append(
                f"index {name!r} ({redact(url)}) is unreachable: its packages come from the "
                f"default index instead (--index {name}=URL names a mirror)"
            )
            continue
        named[name] = url
    named.update(overrides)
    return settings.with_named(named), notes


@contextmanager
def applied_environment(variables: Mapping[str, str | None]) -> Iterator[None]:
    """Set the site's variables for every backend while the block runs, then restore them.

    This is the CLI boundary's job: the variables reach uv, pip, git, py-rattler and the tool's
    HTTP client alike, whichever layer starts them.
    """
    saved = {name: os.environ.get(name) for name in variables}
    _set(variables)
    try:
        yield
    finally:
        _set(saved)


def _set(variables: Mapping[str, str | None]) -> None:
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
