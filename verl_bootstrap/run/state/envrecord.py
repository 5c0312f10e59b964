"""The env's record of how it was made: the profile, every option that shaped the plan, and what
they resolved to. It lives in the env's state, so `--prefix P` alone can resume or re-verify it.

Credentials never enter the record: URLs are masked, and a masked URL is asked for again on resume.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap import __version__
from verl_bootstrap.errors import InputError
from verl_bootstrap.options import Declared, RunOptions, declared
from verl_bootstrap.paths import state_file
from verl_bootstrap.redact import redact
from verl_bootstrap.run.state.state import State

if TYPE_CHECKING:
    from verl_bootstrap.plan.graph import Plan

__all__ = [
    "MASK",
    "plan_options",
    "profile_ref",
    "read_record",
    "record_in",
    "record_of",
    "recorded_options",
]

MASK = "***"


def recorded_options(options: RunOptions) -> tuple[Declared, ...]:
    """The options the record keeps: every one declared on RunOptions as recorded (each changes
    the plan; --wait does not, so it is not kept)."""
    return tuple(o for o in declared(type(options)) if o.spec.recorded)


def profile_ref(profile: str) -> str:
    """A profile as the record keeps it: a shipped name as is, a YAML file as an absolute path."""
    if profile.endswith((".yaml", ".yml")) or "/" in profile:
        return str(Path(profile).expanduser().absolute())
    return profile


def plan_options(plan: Plan) -> dict[str, Any]:
    """The options that shaped `plan`, in the form the record keeps and compares."""
    o = plan.options
    kept = {option.name: _kept(option, getattr(o, option.name)) for option in recorded_options(o)}
    # as the user named them: a profile file by its path, a site config file by its path
    kept["profile"] = profile_ref(o.profile)
    kept["config"] = _config(o.config)
    kept["lockfile"] = _path(plan.named_lockfile)  # the user's, or the lab's --locked took
    # a local path is kept as the URL it resolved to, so a resume from elsewhere finds it
    kept["verl_source"] = redact(plan.source.repo) if o.verl_source else None
    return kept


def _kept(option: Declared, value: Any) -> Any:
    """`value` as the record keeps it: JSON types, paths absolute, credentials masked."""
    if isinstance(value, tuple):
        return [_kept(option, v) for v in value]
    if isinstance(value, Path):
        return _path(value)
    if option.spec.masked and isinstance(value, str):
        return redact(value)
    return value


def record_of(plan: Plan) -> dict[str, Any]:
    """The record a run of `plan` leaves in the env's state."""
    return {
        "options": plan_options(plan),
        "profile_name": plan.profile.name,
        "profile_hash": plan.profile_hash,
        "variant": plan.variant,
        "backend": plan.backend,
        "verl_repo": redact(plan.source.repo),
        "verl_ref": plan.source.ref,
        "interpreter": _path(plan.interpreter),
        "site_files": [s for s in plan.options.site.origin.split(", ") if s],
        "route": plan.route,
        "lockfile": _lock_of(plan),
        "tool_version": __version__,
        "recorded_at": time.time(),
    }


def _lock_of(plan: Plan) -> dict[str, Any] | None:
    """The lockfile the env came from (None: it was resolved)."""
    if plan.locked is None:
        return None
    lock = plan.locked.lock
    return {
        "path": str(plan.locked.path.absolute()),
        "origin": plan.locked.origin,
        "profile_hash": lock.profile_hash,
        "exclude_newer": lock.exclude_newer,
    }


def read_record(prefix: Path) -> dict[str, Any] | None:
    """The record in the env at `prefix`, or None when it has none (not ours, or made before)."""
    path = state_file(prefix)
    if not path.is_file():
        return None
    return record_in(State.load(path))


def record_in(state: State) -> dict[str, Any] | None:
    """The record in an env's loaded `state`, or None when it has none."""
    record = state.record
    if not record:
        return None
    if not isinstance(record.get("options"), dict):
        raise InputError(
            f"{state.path}: field 'record.options' is not a mapping",
            hint="the state was edited by hand; pass --profile and the options again",
        )
    return record


def _config(value: str | None) -> str | None:
    if value is None or "://" in value:
        return None if value is None else redact(value)
    return str(Path(value).expanduser().absolute())


def _path(value: Path | None) -> str | None:
    return None if value is None else str(Path(value).absolute())
