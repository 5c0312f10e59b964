"""A run's options: its flags over the env's record, so `--prefix P` alone resumes P as it was made.

A flag the user gave wins; a flag left out takes the recorded value; with neither, the default (or
the site config's) applies. "Left out" is None, an empty list or False, as the parser leaves them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from installer.errors import InputError
from installer.lifecycle.record import MASK, OPTION_FIELDS

__all__ = ["merge_indexes", "merge_options"]


def merge_options(given: Mapping[str, Any], recorded: Mapping[str, Any] | None) -> dict[str, Any]:
    """Each option: the flag when given, else the record's (indexes are merged by name)."""
    recorded = recorded or {}
    merged: dict[str, Any] = {}
    for name in OPTION_FIELDS:
        value = given.get(name)
        merged[name] = value if _given(value) else recorded.get(name)
    for name in ("verl_source", "config"):
        if MASK in str(merged.get(name) or ""):
            flag = "--" + name.replace("_", "-")
            raise InputError(
                f"the env's recorded {flag} {merged[name]} held credentials, which are never "
                "recorded",
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
    kept = {name: url for name, url in (recorded or []) if MASK not in url}
    merged = {**site, **kept, **flags}
    missing = [name for name, url in (recorded or []) if MASK in url and name not in merged]
    if missing:
        raise InputError(
            f"the env's recorded index(es) {', '.join(missing)} held credentials, which are "
            "never recorded",
            hint=" ".join(f"--index {n}=URL" for n in missing) + ": pass them again",
        )
    return merged


def _given(value: Any) -> bool:
    return value not in (None, False, [], ())
