"""Applying the site config to a run: indexes, PyTorch mirrors, and the backends' variables."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from verl_bootstrap.host.indexes import IndexSettings
from verl_bootstrap.options import SiteOptions

__all__ = ["PYTORCH_INDEX", "applied_environment", "apply_site_indexes", "pytorch_mirrors"]

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
        if url.startswith(PYTORCH_INDEX):
            variant = url.removeprefix(PYTORCH_INDEX).strip("/")
            if variant in mirrors:
                out[name] = mirrors[variant]
    return out


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
