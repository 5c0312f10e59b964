"""The lockfile model (schema version 1).

A lockfile records names, versions and hashes, never download URLs: an index is recorded by the
name the profile gives it ("default" is whatever default index the user configured), so one
lockfile installs from the default index or from any mirror, and the hashes prove it is the same
artifact.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from typing import Annotated, Any, Final, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion
from packaging.version import Version as Pep440
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from verl_bootstrap.installer.artifact import DistSource
from verl_bootstrap.profile.models import VARIANT_NAME, Profile
from verl_bootstrap.profile.stagespec import StageSpec, stage_specs
from verl_bootstrap.safety.buildvars import value_problem
from verl_bootstrap.safety.shapes import (
    FILE_NAME,
    PACKAGE_NAME,
    PROFILE_NAME,
    PYTHON_VERSION,
    SHA256,
    STAGE_ID,
    check,
    is_loopback,
    one_line,
)
from verl_bootstrap.safety.urlmatch import path_problem

__all__ = [
    "LOCK_SCHEMA_VERSION",
    "CondaPackage",
    "CudaTarget",
    "DistSource",
    "ForcedMismatch",
    "KernelWheel",
    "LockedDist",
    "LockedKey",
    "LockedSource",
    "LockedStage",
    "Lockfile",
    "UvLockUse",
    "channel_name",
    "profile_hash",
]

LOCK_SCHEMA_VERSION: Final = 1


# A lockfile is untrusted input: every value that later names a file, a folder or a hash has the
# shape of what it claims to be, so no path built from it can leave its folder.
def _shaped(shape: re.Pattern[str], what: str) -> AfterValidator:
    return AfterValidator(lambda value: check(value, shape, what))


def _one_line(value: str) -> str:
    """A value written on one line of a file (a comment header, a shell word) holds no newline."""
    return one_line(value, "it")


def _pep440(value: str) -> str:
    """A version pip and uv read (PEP 440): an export writes it after `==`."""
    one_line(value, "a version")
    try:
        Pep440(value)
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a valid version (PEP 440)") from None
    return value


def _names_values(key: re.Pattern[str], what: str) -> AfterValidator:
    """A mapping whose keys have `key`'s shape and whose values are one line each."""

    def valid(value: dict[str, str]) -> dict[str, str]:
        for name, item in value.items():
            check(name, key, what)
            one_line(item, f"the value of {name}")
        return value

    return AfterValidator(valid)


StageId = Annotated[str, _shaped(STAGE_ID, "stage id")]
PackageName = Annotated[str, _shaped(PACKAGE_NAME, "package name")]
FileName = Annotated[str, _shaped(FILE_NAME, "file name")]
Sha256 = Annotated[str, _shaped(SHA256, "sha256 (64 hex digits)")]
ProfileName = Annotated[str, _shaped(PROFILE_NAME, "profile name")]
PythonVersion = Annotated[str, _shaped(PYTHON_VERSION, "Python version (3.X)")]
OneLine = Annotated[str, AfterValidator(_one_line)]
# Every other field a lockfile holds has a shape too: it is shared, and its values are written
# into Dockerfiles, Apptainer definitions, pylock.toml, requirements files and shell lines.
Pep440Version = Annotated[str, AfterValidator(_pep440)]
Variant = Annotated[str, _shaped(VARIANT_NAME, "CUDA variant (cpu or cuXYZ)")]
CudaVersion = Annotated[str, _shaped(re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}$"), "CUDA version")]
# a branch, a tag, a commit or a revision (`main~1`, `v1^{}`): no space, quote or shell sign
GitRef = Annotated[
    str, _shaped(re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+~^@{}:-]{0,127}$"), "git ref")
]
Commit = Annotated[str, _shaped(re.compile(r"^[0-9a-f]{7,64}$"), "commit id (hex)")]
IndexName = Annotated[str, _shaped(PROFILE_NAME, "index name")]
Flag = Annotated[
    str, _shaped(re.compile(r"^-{1,2}[A-Za-z0-9][^\s\x00-\x1f\x7f-\x9f]{0,199}$"), "installer flag")
]
Md5 = Annotated[str, _shaped(re.compile(r"^[0-9a-f]{32}$"), "md5 (32 hex digits)")]
ProfileHash = Annotated[str, _shaped(re.compile(r"^sha256:[0-9a-f]{64}$"), "profile hash")]
Cutoff = Annotated[
    str,
    _shaped(
        re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9:.]{2,15}(Z|[+-][0-9:]{2,5})?)?$"),
        "exclude-newer time (ISO 8601)",
    ),
]
CheckName = Annotated[str, _shaped(re.compile(r"^[a-z][a-z0-9_-]{0,63}$"), "check name")]
CondaBuild = Annotated[str, _shaped(re.compile(r"^[A-Za-z0-9_.+-]{1,128}$"), "conda build string")]
ChannelName = Annotated[
    str, _shaped(re.compile(r"^[^\s/\x00-\x1f\x7f-\x9f]{0,128}$"), "channel name")
]
CondaVersion = Annotated[
    str, _shaped(re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}$"), "version")
]
EnvMap = Annotated[
    dict[str, str], _names_values(re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"), "variable name")
]


def _build_env(value: dict[str, str]) -> dict[str, str]:
    """A stage's env reaches every build it runs: no variable that names code or a search path
    (safety/buildvars.py); whether the rest may be set is checked against the profile."""
    for name, item in value.items():
        problem = value_problem(name, item)
        if problem:
            raise ValueError(problem)
    return value


BuildEnv = Annotated[EnvMap, AfterValidator(_build_env)]
VirtualPackages = Annotated[
    dict[str, str], _names_values(re.compile(r"^__[a-z0-9_-]{1,32}$"), "virtual package")
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Version = Annotated[str, _shaped(re.compile(r"^[0-9][0-9A-Za-z.+!_-]{0,63}$"), "version")]
CudaTag = Annotated[
    str, _shaped(re.compile(r"^(cpu|[0-9]{1,3}(\.[0-9]{1,3})?)$"), "CUDA (X.Y or cpu)")
]
PythonTag = Annotated[str, _shaped(re.compile(r"^cp3[0-9]{1,3}$"), "Python tag (cp3XX)")]
PlatformTag = Annotated[str, _shaped(re.compile(r"^[a-z0-9_]{1,64}$"), "platform tag")]


def _wheel_url(value: str | None) -> str | None:
    """A release wheel's URL: http(s), one line, no credentials (a lockfile is shared), its path
    plain (safety/urlmatch.py: no `..`, no encoded dot or slash, no empty segment)."""
    if value is None:
        return None
    _one_line(value)
    scheme, _, rest = value.partition("://")
    host = rest.split("/", 1)[0]
    if scheme != "https" and not (scheme == "http" and is_loopback(value)):
        raise ValueError("must be an https URL (plain http only to this machine)")
    if "@" in host or " " in value:
        raise ValueError("must be an https URL without credentials")
    problem = path_problem(value)
    if problem:  # compared with the profile's sources as a URL: no path climbs out of them
        raise ValueError(f"must be a plain URL: {problem}")
    if not rest.rsplit("/", 1)[-1].split("?", 1)[0].endswith(".whl"):
        raise ValueError("must name a .whl file")
    return value


def _source_id(value: str) -> str:
    """A declared source's id: lower-case letters, digits and '-'."""
    if not value or not all(c.islower() or c.isdigit() or c == "-" for c in value):
        raise ValueError("must be a source id (lower-case letters, digits, '-')")
    return value


class LockedKey(_Strict):
    """The build key a kernel wheel was made for (see docs/kernels.md)."""

    torch: Version
    cuda: CudaTag
    cxx11abi: bool
    python: PythonTag
    platform: PlatformTag


class KernelWheel(_Strict):
    """The wheel a kernel stage installed: prebuilt (lab wheelhouse, release, index) or built
    here from the sdist and published. A `--locked` install of this record takes the same file
    (by sha256, from a wheelhouse or the release URL) or builds the locked sdist and says so."""

    file: FileName
    sha256: Sha256
    source: Literal["wheelhouse", "release", "index", "build"]
    key: LockedKey
    url: Annotated[str | None, AfterValidator(_wheel_url)] = Field(
        default=None, description="Release and index wheels: where the file was downloaded from"
    )
    origin: Annotated[str, AfterValidator(_source_id)] | None = Field(
        default=None,
        description="The declared prebuilt source it came from (official, verl-wheelhouse, "
        "community)",
    )
    trust: Literal["lab", "upstream", "project", "community"] | None = None
    distribution: PackageName | None = Field(
        default=None,
        description="A source's whole wheel: the distribution it is (transformer-engine), "
        "installed in place of the stage's locked one of that name",
    )
    replaces: tuple[PackageName, ...] = Field(
        default=(),
        description="A whole wheel: the stage's locked parts it holds, left out of the install "
        "(the kernel's own distribution among them)",
    )


class LockedDist(_Strict):
    """One distribution a stage installs.

    `source` says what the hashes are: "wheel" (the wheels for the lock's platform and Python),
    "sdist" (no wheel exists: the source archive is hashed and built at install time with the
    stage's `build_env`; a `--locked` install builds it into a wheel first and its env record
    gives that wheel's `built_sha256`), "git" (`url` at
    `commit`, no index), or "editable" (verl's own checkout, recorded under `verl`).
    """

    name: PackageName
    version: Pep440Version
    source: DistSource | None = None
    hashes: tuple[Sha256, ...] = Field(default=(), description="sha256 of each allowed artifact")
    index: IndexName | None = Field(default=None, description="Index name; None: no index")
    url: OneLine | None = Field(default=None, description="For git-sourced builds: the repository")
    commit: Commit | None = Field(default=None, description="For git-sourced builds: the commit")
    build_env: BuildEnv = Field(default_factory=dict)
    built_sha256: Sha256 | None = Field(
        default=None,
        description="Env records of --locked installs: sha256 of the wheel built from the sdist",
    )
    record_sha256: Sha256 | None = Field(
        default=None, description="Env records only: digest of the installed RECORD file"
    )
    kernel_wheel: KernelWheel | None = Field(
        default=None, description="Env records only: the kernel wheel a kernel stage installed"
    )
    replaced_by: PackageName | None = Field(
        default=None,
        description="Env records only: the distribution whose whole kernel wheel was installed "
        "in place of this one, which it holds (TransformerEngine's core and torch extension)",
    )

    @model_validator(mode="after")
    def _hashed(self) -> LockedDist:
        """A wheel or an sdist is installed by its sha256: with none listed, an install or an
        export would have nothing to check it against."""
        if self.source in ("wheel", "sdist") and not self.hashes:
            msg = f"{self.name}: source {self.source} lists no sha256 in hashes"
            raise ValueError(msg)
        return self


class LockedStage(_Strict):
    """A stage and what it installs, in install order."""

    id: StageId
    kind: StageId
    options: tuple[Flag, ...] = Field(default=(), description="installer flags the stage used")
    env: BuildEnv = Field(default_factory=dict)
    distributions: tuple[LockedDist, ...] = ()
    build: tuple[LockedDist, ...] = Field(
        default=(),
        description="The build backends and build dependencies of what the stage builds from "
        "source (its sdists; verl's checkout for install-verl), each with its sha256",
    )

    @model_validator(mode="after")
    def _replaces_inside(self) -> LockedStage:
        """A whole kernel wheel stands in only for this stage's own distributions: a lockfile
        cannot leave out what another stage installs (torch, numpy)."""
        for dist in self.distributions:
            wheel = dist.kernel_wheel
            names = [
                *(wheel.replaces if wheel else ()),
                *([wheel.distribution] if wheel and wheel.distribution else []),
            ]
            outside = [n for n in names if self.find(n) is None]
            if outside:
                raise ValueError(
                    f"{dist.name}'s kernel_wheel names {', '.join(outside)}, which stage "
                    f"{self.id} does not lock (a whole wheel replaces only its own stage's parts)"
                )
        return self

    def find(self, name: str) -> LockedDist | None:
        """The distribution the stage locks under `name` (any spelling of it), or None."""
        wanted = canonicalize_name(name)
        return next((d for d in self.distributions if canonicalize_name(d.name) == wanted), None)


class LockedSource(_Strict):
    """verl's source: a git commit, or (when git was unreachable) the release sdist's hash."""

    repo: OneLine
    ref: GitRef
    kind: Literal["git", "sdist"]
    commit: Commit | None = None
    sdist: FileName | None = None
    sdist_sha256: Sha256 | None = None


class CondaPackage(_Strict):
    """A conda package of the env (conda backend)."""

    name: PackageName
    version: CondaVersion
    build: CondaBuild
    channel: ChannelName
    subdir: FileName
    filename: FileName
    md5: Md5 | None = None
    sha256: Sha256 | None = None


class CudaTarget(_Strict):
    """The CUDA variant and the virtual packages the lock was solved for."""

    variant: Variant
    cuda: CudaVersion | None = None
    virtual_packages: VirtualPackages = Field(default_factory=dict)
    torch: Pep440Version | None = Field(default=None, description="The locked torch version")
    torch_cuda: CudaVersion | None = Field(
        default=None, description="CUDA of the locked torch build (None: a CPU build)"
    )


def _requirement(value: str) -> str:
    """A PEP 508 requirement on one line (a wheel's, or an override)."""
    one_line(value, "a requirement")
    try:
        Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"{value!r} is not a requirement: {exc}") from None
    return value


RequirementText = Annotated[str, AfterValidator(_requirement)]


class ForcedMismatch(_Strict):
    """A pin outside a locked wheel's own requirement that an override forces: the override
    erased the requirement, and no release of the package meets both (see docs/lockfiles.md)."""

    package: PackageName = Field(description="The distribution whose pin breaks the requirement")
    requirement: RequirementText = Field(
        description="The requirement it breaks, as the requiring wheel states it"
    )
    required_by: PackageName = Field(description="The locked distribution that requires it")
    required_by_version: Pep440Version
    override: RequirementText = Field(description="The override that erases the requirement")

    @model_validator(mode="after")
    def _on_package(self) -> ForcedMismatch:
        """The requirement and the override both name the package."""
        wanted = canonicalize_name(self.package)
        for field, value in (("requirement", self.requirement), ("override", self.override)):
            if canonicalize_name(Requirement(value).name) != wanted:
                raise ValueError(f"{field} {value!r} is not a requirement on {self.package}")
        return self

    def line(self) -> str:
        """One line for verify and `lock --check`."""
        return (
            f"{self.required_by} {self.required_by_version} requires {self.requirement}, "
            f"which the override {self.override!r} forces aside"
        )


class UvLockUse(_Strict):
    """The stack was verl's own uv.lock's slice (its ref has no stack in the profile), and
    where it differs from that slice, each with its reason."""

    extras: tuple[PackageName, ...] = Field(description="The extras whose slice is the stack")
    commit: Commit = Field(description="The verl commit whose uv.lock it is")
    pins: int = Field(ge=0, description="How many distributions the slice pins")
    substitutions: tuple[OneLine, ...] = Field(
        default=(), description="`name: uv.lock's pin -> what the stack takes (why)`"
    )


class Lockfile(_Strict):
    """A whole lockfile."""

    schema_version: Literal[1] = LOCK_SCHEMA_VERSION
    generated_by: OneLine
    regenerate: OneLine
    profile: ProfileName
    profile_hash: ProfileHash
    verl: LockedSource
    python: PythonVersion
    platform: FileName = "linux-64"
    cuda: CudaTarget
    exclude_newer: Cutoff | None = None
    backend: Literal["conda", "venv"]
    conda: tuple[CondaPackage, ...] = ()
    conda_gap: OneLine | None = Field(
        default=None,
        description="Why a conda lock holds no conda packages (its channels were unreachable "
        "when it was made): the env's conda part is then solved when the env is made",
    )
    stages: tuple[LockedStage, ...]
    forced: tuple[ForcedMismatch, ...] = Field(
        default=(),
        description="Pins outside a locked wheel's own requirement that an override forces (no "
        "release meets both); `verify` names each as a warning, any other mismatch fails",
    )
    skipped_checks: tuple[CheckName, ...] = ()
    allow_unsupported_ref: bool = False
    uv_lock: UvLockUse | None = Field(
        default=None, description="Set where the stack was verl's own uv.lock's slice"
    )

    def distributions(self) -> dict[str, LockedDist]:
        """Every locked distribution by name (the last stage to install one wins)."""
        return {d.name: d for stage in self.stages for d in stage.distributions}


def channel_name(channel: str) -> str:
    """Channels are recorded by name, like indexes, so a mirror can serve them."""
    return channel.rstrip("/").rsplit("/", 1)[-1] if channel else ""


def _stage_body(stage: StageSpec) -> dict[str, Any]:
    """A stage as the hash sees it. What verl's extras add is hashed only where a stage uses
    them (so profiles without them hash as before); a substitution's reason is left out, as
    descriptions are, and `verl_extras` repeats the deps stage's `extras`."""
    body = {
        k: v
        for k, v in asdict(stage).items()
        if k not in {"description", "kernel", "verl_extras", "substitutions"}
    }
    for key in ("pins_from_verl", "excluded", "verl_lines", "verl_contract"):
        if not body[key]:
            del body[key]
    if stage.substitutions:
        body["substitutions"] = [f"{s.replace}->{s.by}" for s in stage.substitutions]
    return body


def profile_hash(profile: Profile, variant: str) -> str:
    """The hash a lockfile is checked against: what a lock of `variant` is resolved from.

    Inputs: the profile's name, verl source, python, env, named indexes and protected packages;
    the variant's definition; and its stages as resolved for the variant (after `extends` and the
    stack of the profile's verl ref): packages, overrides, kinds, flags, env, indexes and
    expectations. Left out, because no lockfile records them: stacks of other verl refs, other
    variants, verify checks, disk size, descriptions and a stage's `kernel:` block (where its
    wheel may come from and how a build is sized, not what resolves). Changing this recipe makes
    every committed lockfile stale, so it is versioned with the lock schema.
    """

    cuda = profile.cuda_variants.get(variant)
    body = {
        "lock_schema": LOCK_SCHEMA_VERSION,
        "name": profile.name,
        "variant": variant,
        "cuda": cuda.model_dump(mode="json", exclude={"description"}) if cuda else None,
        "verl": profile.verl.model_dump(mode="json"),
        "python": profile.python.model_dump(mode="json"),
        "env": profile.env.model_dump(mode="json"),
        "indexes": {k: v.model_dump(mode="json") for k, v in profile.indexes.items()},
        "protected": list(profile.protected),
        "stages": [_stage_body(stage) for stage in stage_specs(profile, variant)],
    }
    if profile.constraints:  # only a stack that has them (verl's uv.lock's): others hash as before
        body["constraints"] = list(profile.constraints)
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"), default=list).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()
