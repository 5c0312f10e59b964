"""`config show`'s document: the site config read, applied to pip's own settings and to the
environment, and where envs and caches would go (and whether that is a network filesystem)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl_bootstrap.machine.host.filesystems import storage_notes
from verl_bootstrap.machine.host.indexes import read_pip_settings
from verl_bootstrap.paths import default_prefix
from verl_bootstrap.siteconfig.apply import apply_site_indexes
from verl_bootstrap.siteconfig.show import show_json
from verl_bootstrap.siteconfig.siteload import load_site
from verl_bootstrap.siteconfig.translate import site_options

__all__ = ["effective_settings"]


def effective_settings(config: str | None, environ: Mapping[str, str]) -> dict[str, Any]:
    """Every effective setting and its source (secrets redacted), as `config show` prints it."""
    site = load_site(config)
    options = site_options(site, write=False)
    pip = apply_site_indexes(read_pip_settings(), options)
    environment = dict(options.environment)
    body = show_json(site, environment=environment, environ=environ, pip=pip)
    body["notes"] = _storage_notes(site.config.defaults.envs_dir, environment, environ)
    return body


def _storage_notes(
    envs_dir: str | None, site_env: Mapping[str, str | None], environ: Mapping[str, str]
) -> list[str]:
    """Where envs and caches would go, and whether that is a network filesystem."""
    merged = {k: v for k, v in {**environ, **site_env}.items() if v is not None}
    envs = Path(envs_dir) if envs_dir else default_prefix("x").parent
    return storage_notes(envs, merged)
