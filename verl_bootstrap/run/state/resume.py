"""A run's options: its flags over the env's record, so `--prefix P` alone resumes P as it was made.

A flag the user gave wins; a flag left out takes the recorded value; with neither, the default (or
the site config's) applies. "Left out" is None, an empty list or False, as the parser leaves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.options import declared
from verl_bootstrap.run.state.envrecord import MASK

__all__ = ["merge_indexes", "merge_options"]


def merge_options(given: Mapping[str, Any], recorded: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each option: the flag when given, else the record's (indexes are merged by name)."""
    recorded = recorded or {}
    toggles = {o.name for o in declared() if o.spec.kind == "toggle"}  # off is a given value too
    merged = {
        name: given.get(name)
        if _given(given.get(name)) or (name in toggles and given.get(name) is not None)
        else recorded.get(name)
        for name in {**given, **recorded}
    }
    for option in declared():
        masked_value = option.spec.masked and option.spec.kind != "repeat"  # lists: merge_indexes
        if masked_value and MASK in str(merged.get(option.name) or ""):
            flag = option.spec.flags[0]
            raise InputError(
                f"the env's recorded {flag} {merged[option.name]} held credentials, which are "
                "never recorded",
                hint=f"pass {flag} again with them",
            )
    return merged


def merge_indexes(
    site: Mapping[str, str], recorded: list[list[str]] | None, flags: Mapping[str, str]
) -> dict[str, str]:
    """Named indexes: the site config's, then the record's, then --index flags.

    A recorded URL whose credentials were masked gives way to the site config's URL of that name
    (which holds them); with no such URL and no flag, the run cannot know them and says so.
    """
    recorded = _pairs(recorded)
    kept = {name: url for name, url in recorded if MASK not in url}
    merged = {**site, **kept, **flags}
    missing = [name for name, url in recorded if MASK in url and name not in merged]
    if missing:
        raise InputError(
            f"the env's recorded index(es) {', '.join(missing)} held credentials, which are "
            "never recorded",
            hint=" ".join(f"--index {n}=URL" for n in missing) + ": pass them again",
        )
    return merged


def _pairs(recorded: Any) -> list[list[str]]:
    """The record's [name, url] pairs, checked: the state file is input like any other."""
    if recorded is None:
        return []
    ok = isinstance(recorded, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in recorded
    )
    if not ok:
        raise InputError(
            "the env's state: field 'record.options.indexes' is not a list of [name, url] pairs",
            hint="pass --index NAME=URL for each index, or --profile to start the record over",
        )
    return list(recorded)


def _given(value: Any) -> bool:
    return value not in (None, False, [], ())
