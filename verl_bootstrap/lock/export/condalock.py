"""A conda-lock v1 `conda-lock.yml`: the conda packages, then the pip ones, for one platform."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from verl_bootstrap.lock.export.common import ExportEntry, verl_note
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.redact import shareable
from verl_bootstrap.safety.shellquote import one_line

__all__ = ["render_conda_lock"]


def render_conda_lock(
    lock: Lockfile, entries: Sequence[ExportEntry], channels: Mapping[str, str]
) -> str:
    """The conda-lock.yml text. `channels` maps the lock's channel names to the user's URLs."""
    packages = [_conda(lock, p, channels) for p in lock.conda]
    packages += [_pip(lock, e) for e in entries]
    body = {
        "version": 1,
        "metadata": {
            "content_hash": {lock.platform: lock.profile_hash.removeprefix("sha256:")},
            "channels": [
                {"url": shareable(url), "used_env_vars": []}
                for url in sorted(set(channels.values()))
            ],
            "platforms": [lock.platform],
            "sources": [f"verl-bootstrap lockfile: {lock.profile} {lock.cuda.variant}"],
        },
        "package": packages,
    }
    note = one_line(verl_note(lock), "the note on verl")  # a comment line holds it
    header = f"# Exported by verl-bootstrap (conda-lock v1 format).\n# {note}.\n"
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=False, width=1000)


def _conda(lock: Lockfile, package: Any, channels: Mapping[str, str]) -> dict[str, Any]:
    base = channels.get(package.channel, package.channel).rstrip("/")
    return {
        "name": package.name,
        "version": package.version,
        "manager": "conda",
        "platform": lock.platform,
        "dependencies": {},
        "url": shareable(f"{base}/{package.subdir}/{package.filename}"),
        "hash": {k: v for k, v in (("md5", package.md5), ("sha256", package.sha256)) if v},
        "category": "main",
        "optional": False,
        "build": package.build,
    }


def _pip(lock: Lockfile, entry: ExportEntry) -> dict[str, Any]:
    return {
        "name": entry.dist.name,
        "version": entry.dist.version,
        "manager": "pip",
        "platform": lock.platform,
        "dependencies": {},
        "url": shareable(entry.primary.url),
        "hash": {"sha256": entry.primary.sha256},
        "category": "main",
        "optional": False,
    }
