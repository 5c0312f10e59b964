"""The tool's list of the prefixes it has built, so `envs list` finds envs outside its home too.

A small JSON file under the tool home, changed under a lock and written atomically. It is only a
pointer list: each env's own state stays the truth about it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.paths import STATE_DIRNAME, atomic_write, tool_home
from verl_bootstrap.run.state.guard import guarding as holding
from verl_bootstrap.run.state.ownership import check_file, someone_elses
from verl_bootstrap.safety import jsontext

__all__ = [
    "env_name",
    "forget",
    "gone_prefixes",
    "known_prefixes",
    "live_prefixes",
    "named",
    "prune",
    "register",
    "registry_path",
    "why_gone",
]


def registry_path() -> Path:
    """Where the list lives: $VERL_BOOTSTRAP_HOME/envs.json."""
    return tool_home() / "envs.json"


def register(prefix: Path) -> None:
    """Remember `prefix` (idempotent)."""
    _change(lambda prefixes: prefixes | {str(prefix.absolute())})


def forget(prefix: Path) -> None:
    """Drop `prefix` from the list (after `remove`)."""
    _change(lambda prefixes: prefixes - {str(prefix.absolute())})


def gone_prefixes() -> list[Path]:
    """The listed prefixes whose folder (or whose env record in it) is gone, or whose folder is
    another user's now (run/state/ownership.py: a purged /tmp prefix someone made again)."""
    listed = [Path(p) for p in sorted(_read(registry_path()))]
    return [p for p in listed if not _holds_env(p) or someone_elses(p)]


def why_gone(prefix: Path) -> str:
    """Why `envs prune` forgets `prefix` (one of gone_prefixes)."""
    if _holds_env(prefix):
        return "its folder is another user's now"
    return "its folder is gone"


def prune() -> list[Path]:
    """Drop every listed prefix whose env is gone; return them."""
    gone = gone_prefixes()
    if gone:
        _change(lambda prefixes: prefixes - {str(p) for p in gone})
    return gone


def _holds_env(prefix: Path) -> bool:
    return (prefix / STATE_DIRNAME).is_dir()


def known_prefixes() -> list[Path]:
    """Every registered prefix, and every env folder under the tool home, sorted."""
    found = {Path(p) for p in _read(registry_path())}
    envs = tool_home() / "envs"
    if envs.is_dir():
        found |= {p for p in envs.iterdir() if (p / STATE_DIRNAME).is_dir()}
    return sorted(found)


def live_prefixes() -> list[Path]:
    """The known prefixes that still hold an env."""
    return [p for p in known_prefixes() if _holds_env(p)]


def env_name(prefix: Path) -> str:
    """An env's name: its folder's name (`--profile cpu` makes ~/.verl-bootstrap/envs/cpu, named
    cpu; `--prefix ~/envs/rl` makes rl), as conda names the envs in its envs folder."""
    return prefix.name


def named(name: str) -> list[Path]:
    """The live envs called `name` (more than one when two folders share a name)."""
    return [p for p in live_prefixes() if env_name(p) == name]


def _change(edit: Callable[[set[str]], set[str]]) -> None:
    path = registry_path()
    with holding(path.with_suffix(".lock"), wait=10.0):
        prefixes = edit(set(_read(path)))
        atomic_write(path, json.dumps({"prefixes": sorted(prefixes)}, indent=2) + "\n")


def _read(path: Path) -> list[str]:
    if not path.is_file():
        return []
    check_file(path, what="list of envs")  # another user's list could name any folder
    try:
        raw = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(
            f"{path}: unreadable list of envs ({exc})",
            hint="delete it; each env keeps its own record, and runs register them again",
        ) from exc
    prefixes = raw.get("prefixes") if isinstance(raw, dict) else None
    if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
        raise InputError(f"{path}: field 'prefixes' must be a list of paths", hint="delete it")
    return [p for p in prefixes if Path(p).is_absolute()]
