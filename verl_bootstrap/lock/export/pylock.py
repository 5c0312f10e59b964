"""A PEP 751 `pylock.toml` (installable with `uv pip sync pylock.toml`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from verl_bootstrap import __version__
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.lock.export.common import ExportEntry, verl_note
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.platforms import MACHINES
from verl_bootstrap.redact import shareable
from verl_bootstrap.safety.shellquote import one_line

__all__ = ["render_pylock"]


def _s(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value)


def render_pylock(lock: Lockfile, entries: Sequence[ExportEntry]) -> str:
    """The pylock.toml text: every locked distribution, its locked artifacts with their URLs."""
    machine = MACHINES.get(lock.platform, lock.platform)
    marker = f"sys_platform == 'linux' and platform_machine == '{machine}'"
    head = [
        f"# Exported by verl-bootstrap from the {lock.profile} lockfile "
        f"({lock.cuda.variant}, {lock.platform}, Python {lock.python}).",
        f"# {verl_note(lock)}.",
        'lock-version = "1.0"',
        f"environments = [{_s(marker)}]",
        f"requires-python = {_s(f'=={lock.python}.*')}",
        "extras = []",
        "dependency-groups = []",
        "default-groups = []",
        f"created-by = {_s(f'verl-bootstrap {__version__}')}",
    ]
    head = [one_line(line, "a line of pylock.toml") for line in head]  # comments hold values
    return "\n".join(head) + "\n" + "".join(_package(e) for e in entries)


def _package(entry: ExportEntry) -> str:
    lines = [
        "",
        "[[packages]]",
        f"name = {_s(entry.dist.name)}",
        f"version = {_s(entry.dist.version)}",
    ]
    wheels = [a for a in entry.artifacts if a.kind == "wheel"]
    sdists = [a for a in entry.artifacts if a.kind == "sdist"]
    if wheels:
        lines.append("wheels = [" + ", ".join(_artifact(a) for a in wheels) + "]")
    elif sdists:
        lines.append(f"sdist = {_artifact(sdists[0])}")
    lines += ["", "[packages.tool.verl-bootstrap]", f"stage = {_s(entry.stage)}"]
    if entry.dist.build_env:
        env = ", ".join(f"{_s(k)} = {_s(v)}" for k, v in sorted(entry.dist.build_env.items()))
        lines.append(f"build-env = {{ {env} }}")
    return "\n".join(lines) + "\n"


def _artifact(artifact: Artifact) -> str:
    parts = [f"name = {_s(artifact.filename)}", f"url = {_s(shareable(artifact.url))}"]
    if artifact.size is not None:
        parts.append(f"size = {artifact.size}")
    parts.append(f"hashes = {{ sha256 = {_s(artifact.sha256)} }}")
    return "{ " + ", ".join(parts) + " }"
