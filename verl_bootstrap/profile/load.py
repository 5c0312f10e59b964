"""Find, merge (`extends`) and validate profiles; every error names file, line and field."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verl_bootstrap.errors import InputError
from verl_bootstrap.paths import PROFILES_DIR
from verl_bootstrap.profile.models import SCHEMA_VERSION, Profile
from verl_bootstrap.safety.yamlfile import Key, Located, load_yaml

__all__ = ["PROFILES_DIR", "list_profiles", "load_profile", "profile_path"]


_MAX_DEPTH = 16
MAX_PROFILE_BYTES = 1024 * 1024  # the largest shipped profile is under 10 KB


def profile_path(name_or_path: str, *, search: Path = PROFILES_DIR) -> Path:
    """A profile name (`fsdp`) or a path to a YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"}:
        if not candidate.is_file():
            why = "is not a regular file" if candidate.exists() else "does not exist"
            raise InputError(f"profile file {candidate} {why}")
        return candidate
    found = search / f"{name_or_path}.yaml"
    if not found.is_file():
        names = list_profiles(search)
        close = difflib.get_close_matches(name_or_path, names, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        raise InputError(
            f"unknown profile {name_or_path!r}",
            hint=f"{guess}shipped profiles: {', '.join(names) or 'none'}; or pass a YAML file",
        )
    return found


def list_profiles(search: Path = PROFILES_DIR) -> list[str]:
    """Names of the profiles in `search`."""
    return sorted(p.stem for p in search.glob("*.yaml"))


def load_profile(name_or_path: str, *, search: Path = PROFILES_DIR) -> Profile:
    """Load a profile, merge its `extends` chain, and validate the result strictly."""
    path = profile_path(name_or_path, search=search)
    merged = _merged(path, search=search, chain=())
    data = dict(merged.data)
    data.setdefault("name", path.stem)
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise _explain(exc, merged, path) from None


def _merged(path: Path, *, search: Path, chain: tuple[Path, ...]) -> Located:
    resolved = path.resolve()
    if len(chain) > _MAX_DEPTH:
        raise InputError(f"{path}: 'extends' chain is deeper than {_MAX_DEPTH}")
    own = load_yaml(path, what="profile", max_bytes=MAX_PROFILE_BYTES)  # bounded; errors: file:line
    if not isinstance(own.data, dict):
        raise InputError(f"{path}:1: a profile must be a YAML mapping of keys to values")
    if "schema_version" not in own.data:  # every file, not only the root of an `extends` chain
        raise InputError(
            f"{path}:1: schema_version: required key is missing",
            hint=f"add `schema_version: {SCHEMA_VERSION}` at the top",
        )
    parent_name = own.data.get("extends")
    if parent_name is None:
        return own
    if not isinstance(parent_name, str):
        line = own.lines.get(("extends",), (path, 1))[1]
        raise InputError(f"{path}:{line}: extends: must be a profile name")
    parent_path = _parent_path(parent_name, path, search, own)
    if parent_path.resolve() in (*chain, resolved):
        # reported at the `extends` line that closes the loop, which is the one to remove
        cycle = " -> ".join(p.name for p in (*chain, resolved, parent_path.resolve()))
        line = own.lines.get(("extends",), (path, 1))[1]
        raise InputError(
            f"{path}:{line}: extends: {parent_name!r} makes a cycle: {cycle}",
            hint="remove one of the 'extends' links",
        )
    parent = _merged(parent_path, search=search, chain=(*chain, resolved))
    return _overlay(parent, own)


def _parent_path(name: str, child: Path, search: Path, own: Located) -> Path:
    """The file `extends: name` names: beside the child, else a shipped one. A file never extends
    itself, so `extends: cpu` in one's own cpu.yaml is the shipped cpu."""
    for folder in (child.parent, search):
        for candidate in (folder / name, folder / f"{name}.yaml"):
            if candidate.is_file() and candidate.resolve() != child.resolve():
                return candidate
    line = own.lines.get(("extends",), (child, 1))[1]
    known = [
        n for n in list_profiles(search) if (search / f"{n}.yaml").resolve() != child.resolve()
    ]
    raise InputError(
        f"{child}:{line}: extends: no profile named {name!r}",
        hint=f"profiles that can be extended: {', '.join(known) or 'none'}; "
        "or name a YAML file beside this one",
    )


def _overlay(parent: Located, child: Located) -> Located:
    """Mappings merge key by key (the child wins); lists and scalars are replaced whole.

    The name is never inherited: a child without one is named after its own file, so that its
    lockfile and state never claim the parent profile made the env.
    """
    data = _deep_merge({k: v for k, v in parent.data.items() if k != "name"}, child.data)
    data.pop("extends", None)
    lines = dict(parent.lines)
    for key in child.lines:
        lines = {k: v for k, v in lines.items() if k[: len(key)] != key or len(key) == 0}
    lines.update(child.lines)
    return Located(data=data, lines=lines)


def _deep_merge(base: Any, top: Any) -> Any:
    if isinstance(base, dict) and isinstance(top, dict):
        out = dict(base)
        for key, value in top.items():
            out[key] = _deep_merge(base.get(key), value) if key in base else value
        return out
    return top


def _explain(exc: ValidationError, merged: Located, path: Path) -> InputError:
    """Turn pydantic's errors into `file:line: field: problem` lines."""
    lines, fields = [], []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not _is_union_tag(p))
        loc = (*loc, *getattr(err.get("ctx", {}).get("error"), "loc", ()))  # see FieldError
        where_file, where_line = _locate(loc, merged, path)
        field = ".".join(str(p) for p in loc) or "(top level)"
        problem = _problem(err)
        lines.append(f"{where_file}:{where_line}: {field}: {problem}")
        fields.append(
            {"file": str(where_file), "line": where_line, "field": field, "problem": problem}
        )
    return InputError(
        "invalid profile:\n  " + "\n  ".join(lines),
        hint="fix the field(s) above; `verl-bootstrap profiles validate FILE` re-checks a file",
        data={"fields": fields},
    )


def _is_union_tag(part: object) -> bool:
    return isinstance(part, str) and ("[" in part or part.startswith("function-"))


def _locate(loc: Key, merged: Located, path: Path) -> tuple[Path, int]:
    for cut in range(len(loc), -1, -1):
        found = merged.lines.get(loc[:cut])
        if found:
            return found
    return path, 1


_YAML_WORDS = {"tuple_type": "must be a list", "dict_type": "must be a mapping of keys to values"}


def _problem(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key (check its spelling against the profile schema)"
    if kind == "missing":
        if tuple(err["loc"]) == ("schema_version",):
            return f"required key is missing; add `schema_version: {SCHEMA_VERSION}` at the top"
        return "required key is missing"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        message = f"must be one of {expected} (got {err.get('input')!r})"
        if tuple(err["loc"]) == ("schema_version",):
            message += f"; this verl-bootstrap reads profile schema_version {SCHEMA_VERSION}"
        return message
    # YAML has lists and mappings; pydantic's words for them (tuple, dictionary) would confuse
    message = _YAML_WORDS.get(kind) or str(err["msg"]).removeprefix("Value error, ")
    given = err.get("input")
    if kind != "value_error" and isinstance(given, (str, int, float, bool)):
        message += f" (got {given!r})"
    return message
