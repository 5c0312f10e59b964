"""The recorded lists of prebuilt kernel wheels: for each declared source, the wheels it was seen
to publish, when and from which of its own published lists. Committed with the profiles
(`profiles/kernel-wheels/recorded.yaml`), so the plan and `kernels coverage` know offline which
source serves which stack; `kernels coverage --refresh` asks each source again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import unquote, urlparse

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from verl_bootstrap.errors import InputError, field_problems, said_of
from verl_bootstrap.kernels.key import BuildKey, parse_wheel_name
from verl_bootstrap.profile.kernel import PrebuiltSource
from verl_bootstrap.profile.load import profile_path
from verl_bootstrap.safety.yamlfile import load_yaml

__all__ = [
    "KernelRecord",
    "Listed",
    "RecordedSource",
    "listed_wheels",
    "load_record",
    "record_for_profile",
    "record_path",
    "wheel_file",
]

MAX_RECORD_BYTES = 2 * 1024 * 1024


def _wheel_url(value: str) -> str:
    """An http(s) URL, one line, no credentials, naming a .whl (the record is shared)."""
    _https(value)
    if not wheel_file(value).endswith(".whl"):
        raise ValueError("must name a .whl file")
    return value


def _https(value: str) -> str:
    """An http(s) URL on one line without credentials."""
    scheme, _, rest = value.partition("://")
    bad = scheme not in {"https", "http"} or "@" in rest.split("/", 1)[0]
    if bad or any(c.isspace() for c in value):
        raise ValueError("must be an http(s) URL without credentials")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RecordedSource(_Strict):
    """What one source was seen to publish."""

    recorded: dt.date = Field(description="The day the list was taken.")
    origin: str = Field(
        alias="from", description="The source's own published list it was taken from."
    )
    wheels: tuple[Annotated[str, AfterValidator(_wheel_url)], ...] = Field(
        default=(), description="Each wheel's URL, the newest release first."
    )
    list: Annotated[str, AfterValidator(_https)] | None = Field(
        default=None,
        description="A page the source publishes listing its wheels, which --refresh reads "
        "(else each asset is asked with a HEAD).",
    )


class KernelRecord(_Strict):
    """The whole recorded list: source id -> what it publishes."""

    schema_version: Literal[1]
    sources: dict[str, RecordedSource] = Field(default_factory=dict)


@dataclass(frozen=True)
class Listed:
    """One recorded wheel of a source, with the key it is built for (name + stated fields)."""

    url: str
    file: str
    version: str
    key: BuildKey
    recorded: dt.date


def record_path(profile_file: Path) -> Path:
    """The recorded list that goes with a profile: beside it, in kernel-wheels/."""
    return profile_file.parent / "kernel-wheels" / "recorded.yaml"


def record_for_profile(name_or_path: str) -> KernelRecord | None:
    """The recorded lists beside a profile (a shipped name or a file); None: no such file."""
    try:
        found = profile_path(name_or_path)
    except InputError:
        return None
    return load_record(record_path(found))


def load_record(path: Path) -> KernelRecord:
    """The recorded list at `path` (none there: an empty one); a bad file is an InputError."""
    if not path.is_file():
        return KernelRecord(schema_version=1)
    located = load_yaml(path, what="recorded kernel list", max_bytes=MAX_RECORD_BYTES)
    try:
        return KernelRecord.model_validate(located.data)
    except ValidationError as exc:
        [first] = field_problems(exc.errors()[:1])
        raise InputError(
            f"{path}: {said_of([first])}",
            hint="fix the file, or refresh it with `verl-bootstrap kernels coverage --refresh`",
        ) from None


def wheel_file(url: str) -> str:
    """The file name a wheel URL names."""
    return unquote(urlparse(url).path.rsplit("/", 1)[-1])


def listed_wheels(
    source: PrebuiltSource, distribution: str, record: KernelRecord
) -> tuple[Listed, ...] | None:
    """The recorded wheels of `distribution` from `source`, in the record's order; None when
    the record has no list for the source (then nothing is known either way)."""
    seen = record.sources.get(source.id)
    if seen is None:
        return None
    stated = BuildKey.from_mapping(source.key)
    out = []
    for url in seen.wheels:
        parsed = _parse(source, wheel_file(url), distribution)
        if parsed is not None:
            version, named = parsed
            key = stated.stated_over(named)
            out.append(Listed(url, wheel_file(url), version, key, seen.recorded))
    return tuple(out)


def _parse(source: PrebuiltSource, file: str, distribution: str) -> tuple[str, BuildKey] | None:
    """(version, the key its name states) of a wheel of `distribution`; None: another one."""
    if source.release is not None:
        got = parse_wheel_name(source.release, file)
        if got is None or not _named(file, distribution):
            return None
        return got
    try:
        name, version, _, tags = parse_wheel_filename(file)
    except InvalidWheelFilename:
        return None
    if name != canonicalize_name(distribution):
        return None
    tag = sorted(tags, key=str)[0]
    python = tag.interpreter if tag.interpreter.startswith("cp") else None
    return version.public, BuildKey(python=python, platform=tag.platform)


def _named(file: str, distribution: str) -> bool:
    """The file is a wheel of `distribution` (a pattern may serve several)."""
    head = file.split("-", 1)[0]
    return canonicalize_name(head) == canonicalize_name(distribution)
