"""One site config, translated for every backend: uv and pip, py-rattler/conda, git, and the
variables all of them read (proxies, CA bundle, caches).

- uv and pip get the same index flags (through RunOptions.site and the named indexes);
- py-rattler and any conda/mamba get a generated .condarc (channel_alias, custom_channels) via
  $CONDARC, and the package cache via $VERL_BOOTSTRAP_CACHE and $CONDA_PKGS_DIRS;
- git gets `url.<mirror>.insteadOf` through $GIT_CONFIG_COUNT/KEY/VALUE, so the verl clone and
  the `git+https://` sources of TransformerEngine or Megatron both reach the mirror;
- every tool reads the proxy and CA variables.

The site config's variables replace the same variables in the environment (a machine-wide
SSL_CERT_FILE would otherwise defeat the lab's CA); `config show` names each one it replaces.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from verl_bootstrap.errors import InputError
from verl_bootstrap.options import SiteOptions
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.credentials import git_auth_settings, git_config_env, split_url
from verl_bootstrap.siteconfig.settings import Caches, CondaMirror, Network, SiteConfig
from verl_bootstrap.siteconfig.siteload import LoadedSite

__all__ = [
    "backend_environment",
    "condarc_path",
    "condarc_text",
    "git_environment",
    "named_indexes",
    "site_options",
    "write_condarc",
]

_UV_INDEX_VARIABLES = (
    "UV_DEFAULT_INDEX",
    "UV_INDEX_URL",
    "UV_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
)
_CA_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "GIT_SSL_CAINFO",
    "CURL_CA_BUNDLE",
)


def named_indexes(config: SiteConfig) -> dict[str, str]:
    """Profile index name -> URL, as --index NAME=URL would give."""
    return dict(config.mirrors.indexes)


def site_options(
    site: LoadedSite, environ: Mapping[str, str] | None = None, *, write: bool = True
) -> SiteOptions:
    """What a run takes from the site config (its named indexes go to RunOptions.indexes).

    With `write`, the generated .condarc is written where $CONDARC will point.
    """
    env = dict(os.environ if environ is None else environ)
    config = site.config
    text = condarc_text(config.mirrors.conda)
    condarc = write_condarc(text, env) if write else condarc_path(text, env)
    pypi = config.mirrors.pypi
    return SiteOptions(
        index_url=pypi.index_url,
        extra_index_urls=pypi.extra_index_urls,
        find_links=pypi.find_links,
        pytorch=tuple(sorted(config.mirrors.pytorch.items())),
        environment=tuple(sorted(backend_environment(config, env, condarc=condarc).items())),
        notes=tuple(_notes(config)),
        origin=", ".join(f"{s.label} {redact(s.location)}" for s in site.used),
        wheelhouse=config.wheelhouse,
        kernel_sources=config.kernel_sources,
        cuda_arch=config.defaults.cuda_arch or (),
        lockfiles=config.lockfiles,
    )


def backend_environment(
    config: SiteConfig, environ: Mapping[str, str], *, condarc: Path | None = None
) -> dict[str, str | None]:
    """The variables every backend reads, for this config (None: unset it)."""
    env: dict[str, str | None] = {
        **_uv_index_environment(config, environ),
        **_proxy_environment(config.network),
        **_ca_environment(config.network),
        **_cache_environment(config.caches),
        **git_environment(config.mirrors.git, environ),
    }
    if condarc is not None:
        env["CONDARC"] = str(condarc)
    return env


def _uv_index_environment(config: SiteConfig, environ: Mapping[str, str]) -> dict[str, str | None]:
    """uv's own index variables, unset when the site sets the index: uv would read them over the
    flags verl-bootstrap passes (an ambient UV_DEFAULT_INDEX beats --index-url)."""
    pypi = config.mirrors.pypi
    if pypi.index_url is None and pypi.extra_index_urls is None and pypi.find_links is None:
        return {}
    return {name: None for name in _UV_INDEX_VARIABLES if name in environ}


def _proxy_environment(network: Network) -> dict[str, str]:
    proxy = network.proxy
    pairs = {"HTTP_PROXY": proxy.http, "HTTPS_PROXY": proxy.https}
    if proxy.no_proxy is not None:
        pairs["NO_PROXY"] = ",".join(proxy.no_proxy)
    env: dict[str, str] = {}
    for name, value in pairs.items():
        if value is not None:  # curl and git read the lower-case names
            env[name] = env[name.lower()] = value
    return env


def _ca_environment(network: Network) -> dict[str, str]:
    if network.ca_bundle is None:
        return {}
    bundle = Path(network.ca_bundle)
    if not bundle.is_file():
        raise InputError(
            f"network.ca_bundle {bundle} does not exist",
            hint="point it at a PEM file of the CAs your mirrors use (and the public ones)",
        )
    return dict.fromkeys(_CA_VARIABLES, str(bundle))


def _cache_environment(caches: Caches) -> dict[str, str]:
    env: dict[str, str] = {}
    if caches.uv:
        env["UV_CACHE_DIR"] = caches.uv
    if caches.pip:
        env["PIP_CACHE_DIR"] = caches.pip
    if caches.conda:
        env["VERL_BOOTSTRAP_CACHE"] = env["RATTLER_CACHE_DIR"] = caches.conda
        env["CONDA_PKGS_DIRS"] = str(Path(caches.conda) / "conda-pkgs")
    return env


def git_environment(rewrites: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """`url.<mirror>.insteadOf = <prefix>` for each rewrite, after any GIT_CONFIG_* already set.

    A mirror's credential is not part of the rewritten URL (git would pass that URL, token and
    all, on the command line of its `git remote-http` helper): it goes in an Authorization
    header for the mirror's host instead."""
    if not rewrites:
        return {}
    settings, found = [], []
    for prefix, mirror in sorted(rewrites.items()):
        clean, cred = split_url(mirror)
        settings.append((f"url.{clean}.insteadOf", prefix))
        found += [cred] if cred else []
    return git_config_env([*settings, *git_auth_settings(found)], environ)


def condarc_text(conda: CondaMirror) -> str | None:
    """The .condarc that points channel names at the mirror (None when nothing is set)."""
    body: dict[str, object] = {}
    if conda.channel_alias:
        body["channel_alias"] = conda.channel_alias
    if conda.custom_channels:
        body["custom_channels"] = dict(sorted(conda.custom_channels.items()))
    if conda.channels is not None:
        body["channels"] = list(conda.channels)
    if not body:
        return None
    header = "# Generated by verl-bootstrap from the site config; edit the site config instead.\n"
    return header + yaml.safe_dump(body, sort_keys=True)


def condarc_path(text: str | None, environ: Mapping[str, str]) -> Path | None:
    """Where the generated .condarc goes: the user's cache, named by its content."""
    if text is None:
        return None
    home = Path(environ.get("HOME") or Path.home())
    cache = Path(environ.get("XDG_CACHE_HOME") or home / ".cache") / "verl-bootstrap" / "site"
    return cache / f"condarc-{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"


def write_condarc(text: str | None, environ: Mapping[str, str]) -> Path | None:
    """Write the generated .condarc (once); return its path."""
    path = condarc_path(text, environ)
    if text is not None and path is not None and not path.exists():
        atomic_write(path, text)
        path.chmod(0o600)  # a channel URL may carry a token
    return path


def _notes(config: SiteConfig) -> list[str]:
    return [
        f"git URLs under {redact(prefix)} are fetched from {redact(mirror)} (site config)"
        for prefix, mirror in sorted(config.mirrors.git.items())
    ]
