"""Site config: a lab's mirrors, proxies, CA bundle, caches and defaults, in one YAML file.

`load_site` finds and merges the files; `translate` turns one config into what each backend
reads; `apply` puts it into a run; `show` renders `config show`.
"""

from __future__ import annotations

from verl_bootstrap.siteconfig.settings import SITE_SCHEMA_VERSION, SiteConfig
from verl_bootstrap.siteconfig.siteload import (
    ENV_VAR,
    SYSTEM_CONFIG,
    ConfigSource,
    LoadedSite,
    config_sources,
    load_site,
    read_location,
)
from verl_bootstrap.siteconfig.translate import (
    backend_environment,
    condarc_text,
    git_environment,
    named_indexes,
    site_options,
)

__all__ = [
    "ENV_VAR",
    "SITE_SCHEMA_VERSION",
    "SYSTEM_CONFIG",
    "ConfigSource",
    "LoadedSite",
    "SiteConfig",
    "backend_environment",
    "condarc_text",
    "config_sources",
    "git_environment",
    "load_site",
    "named_indexes",
    "read_location",
    "site_options",
]
