"""The env's state.json, read as untrusted input: a corrupt or foreign file is an InputError.

The state decides which steps are skipped, so a file another tool (or a crash of the disk) left
there must never be half-trusted: it is bounded in size and parsed as JSON with no duplicate keys
here, and checked field by field by its model (state.state.State) before the runner uses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.safety import jsontext
from verl_bootstrap.safety.yamlfile import read_untrusted

__all__ = ["HINT", "read_state_json"]

MAX_STATE_BYTES = 4 * 1024 * 1024
HINT = "delete that file to start the env's steps over (the installed packages stay)"


def read_state_json(path: Path, version: int) -> dict[str, Any]:
    """The JSON object at `path`, of state version `version`; state.state.State checks the
    fields. An InputError says what is wrong."""
    try:
        text = read_untrusted(path, what="state file", max_bytes=MAX_STATE_BYTES)
    except InputError as exc:
        raise InputError(exc.message, hint=HINT) from None
    try:
        raw = jsontext.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError as exc:
        raise InputError(
            f"{path}: unreadable state ({exc})",
            hint=HINT,
            data={"file": str(path), "reason": "unreadable"},
        ) from None
    if not isinstance(raw, dict) or "version" not in raw:
        data = {"file": str(path), "reason": "not-state"}
        raise InputError(f"{path}: not a verl-bootstrap state file", hint=HINT, data=data)
    if raw["version"] != version:
        raise InputError(
            f"{path}: state version {raw['version']!r} is not supported "
            f"(this verl-bootstrap writes {version})",
            hint=HINT,
            data={"file": str(path), "reason": "version", "version": raw["version"]},
        )
    return raw


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        keys = [k for k, _ in pairs]
        repeated = next(k for i, k in enumerate(keys) if k in keys[:i])
        raise ValueError(f"duplicate key {repeated!r}")
    return found
