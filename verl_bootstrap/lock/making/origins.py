"""Where a lock's packages come from on this machine, for the commands that read a lockfile
(`export`, `bundle`): the user's indexes, with the lock's profile's named ones, and the conda
channels its packages name."""

from __future__ import annotations

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.condarc import channel_url, channel_urls, load_condarc
from verl_bootstrap.lock.format import Lockfile, channel_name
from verl_bootstrap.machine.host.indexes import IndexSettings, read_pip_settings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile import load_profile
from verl_bootstrap.siteconfig.apply import index_settings

__all__ = ["lock_channels", "lock_index_settings"]


def lock_index_settings(lock: Lockfile, options: RunOptions) -> IndexSettings:
    """The user's index settings, with the lock's profile's named indexes when it is known."""
    try:
        profile = load_profile(lock.profile)
    except InputError:  # a lockfile from elsewhere: pip's settings and --index only
        return read_pip_settings().with_named(dict(options.indexes))
    return index_settings(profile, options)[0]


def lock_channels(lock: Lockfile, options: RunOptions) -> dict[str, str]:
    """The lock's channel names -> URLs from --channel, else the user's .condarc."""
    settings = load_condarc()
    configured = {channel_name(u): u for u in channel_urls(options.channels, settings)}
    names = {p.channel for p in lock.conda}
    return {n: configured.get(n) or channel_url(n, settings) for n in sorted(names)}
