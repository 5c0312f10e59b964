"""Pydantic models of a profile file (`profiles/*.yaml`), schema version 1.

Strict at the boundary: unknown keys are errors, `schema_version` is required, and the cross-field
rules (verl first, known CUDA variants, no vLLM beside SGLang) are checked here so that an invalid
profile is refused before anything runs.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from verl_bootstrap.profile.kernel import KernelSpec
from verl_bootstrap.safety.buildvars import never_allowed
from verl_bootstrap.safety.shapes import PROFILE_NAME, one_line, relative_path

__all__ = [
    "SCHEMA_VERSION",
    "CudaVariant",
    "EnvSpec",
    "FieldError",
    "IndexSpec",
    "Profile",
    "PythonSpec",
    "Stack",
    "Stage",
    "StageVariant",
    "Substitution",
    "VerifySpec",
    "VerlSource",
]

SCHEMA_VERSION = 1
VARIANT_NAME = re.compile(r"^(cpu|cu1[0-9]{2})$")
STAGE_ID = re.compile(r"^[a-z][a-z0-9-]*$")
RESERVED_STEP_IDS = frozenset(
    {"create-env", "fetch-source", "install-verl", "record-lock", "verify"}
)
# Built-in steps that run before every stage, so a stage may name them in `needs`.
EARLIER_STEP_IDS = frozenset({"create-env", "fetch-source", "install-verl"})
_ENGINES = ("vllm", "sglang")
_RELEASE = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?)$")
# From this release on, vLLM and SGLang pin different torch and transformers builds.
_ENGINES_SPLIT_AT = Version("0.9.1")


class FieldError(ValueError):
    """A validator's error that names the key to blame, below the model that raised it.

    Cross-field checks run on a whole model, so pydantic locates them at the model itself;
    `loc` lets the loader point at the stage and key (and so the line) that is wrong.
    """

    def __init__(self, message: str, loc: tuple[str | int, ...]) -> None:
        super().__init__(message)
        self.loc = loc


def _check_ranges(value: dict[str, str]) -> dict[str, str]:
    for name, spec in value.items():
        try:
            _check_specifier(spec)
        except ValueError as exc:
            raise FieldError(str(exc), (name,)) from None
    return value


class Strict(BaseModel):
    """Base of every file model: unknown keys are errors and instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


def _check_specifier(value: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier as exc:
        msg = f"{value!r} is not a version range (write it like '>=3.10,<3.13')"
        raise ValueError(msg) from exc
    return value


class VerlSource(Strict):
    """Where verl's source comes from and at which ref."""

    repo: str = "https://github.com/verl-project/verl.git"
    ref: str = "v0.9.1"
    sdist_fallback: bool = Field(
        default=True,
        description="When the git URL is unreachable and no stage needs a repo-only file, "
        "use verl's release sdist from the configured index.",
    )


class PythonSpec(Strict):
    """Which interpreter the env gets."""

    requires: str = ">=3.10,<3.13"
    prefer: str = "3.12"

    _requires = field_validator("requires")(_check_specifier)

    @field_validator("prefer")
    @classmethod
    def _prefer_is_version(cls, value: str) -> str:
        try:
            Version(value)
        except InvalidVersion as exc:
            msg = f"{value!r} is not a Python version (write it like '3.12')"
            raise ValueError(msg) from exc
        return value


class EnvSpec(Strict):
    """The env backend and, for conda, the channels it solves against."""

    backend: Literal["conda", "venv"] = "conda"
    channels: tuple[str, ...] = ("conda-forge",)
    conda_packages: tuple[str, ...] = ()


class IndexSpec(Strict):
    """A named package index. Lockfiles record the name; URLs come from the user's config."""

    url: str
    optional: bool = Field(
        default=False,
        description="Used when reachable; otherwise the run says so and resolves from the "
        "other indexes (the default index and the user's pip find-links).",
    )

    @field_validator("url")
    @classmethod
    def _one_url(cls, value: str) -> str:
        # probed and passed to uv: one line, and a URL Python can read (`http://[::1` is not)
        one_line(value, "an index URL")
        try:
            _ = urlsplit(value).port  # the host and port are read only when asked for
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL ({exc})") from None
        return value


class CudaVariant(Strict):
    """A CUDA build of the stack, and the drivers that can run it."""

    cuda: str | None = Field(default=None, description="CUDA version of the wheels, e.g. '13.0'.")
    min_driver: str | None = None
    max_driver: str | None = Field(default=None, description="Exclusive upper bound.")
    description: str = ""


class StageVariant(Strict):
    """What a stage does differently for one CUDA variant."""

    packages: tuple[str, ...] | None = None
    overrides: tuple[str, ...] | None = None
    expect: dict[str, str] | None = None


class Substitution(Strict):
    """Where a variant must differ from what verl's own extras declare, and why."""

    replace: str = Field(description="A distribution verl's extras declare.")
    by: str | None = Field(
        default=None,
        description="The requirement installed instead (None: left out, and the reason says "
        "what stands in for it).",
    )
    variants: tuple[str, ...] = Field(
        default=(), description="The CUDA variants it applies to (empty: every variant)."
    )
    source: str | None = Field(
        default=None,
        description="Where it comes from instead of the source verl's [tool.uv.sources] names "
        "(e.g. 'the default index'); with no `by`, verl's requirement itself is kept.",
    )
    reason: str = Field(min_length=1)

    def keeps_requirement(self) -> bool:
        """Only the source differs: verl's own requirement is installed, from elsewhere."""
        return self.by is None and self.source is not None

    def applies(self, variant: str) -> bool:
        """Whether it holds for `variant`."""
        return not self.variants or variant in self.variants


class Stage(Strict):
    """One accelerator stage: a set of packages (or verl's own script) installed in order."""

    id: str
    kind: Literal["packages", "verl-deps", "script", "install-verl"] = "packages"
    description: str = ""
    packages: tuple[str, ...] = ()
    extras: tuple[str, ...] = Field(default=(), description="verl extras, for kind verl-deps.")
    pins_from_verl: bool = Field(
        default=False,
        description="Each package named without a version takes the requirement verl's extras "
        "(the verl-deps stage's `extras`, read from verl's pyproject.toml) declare for it.",
    )
    script: str | None = Field(default=None, description="Path inside verl's checkout.")
    index: str | None = Field(default=None, description="Name of an index from `indexes`.")
    no_build_isolation: bool = False
    no_deps: bool = False
    overrides: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    expect: dict[str, str] = Field(
        default_factory=dict, description="Distribution -> version range checked after the stage."
    )
    needs: tuple[str, ...] = Field(default=(), description="Earlier stage ids this one needs.")
    variants: dict[str, StageVariant] = Field(default_factory=dict)
    kernel: KernelSpec | None = Field(
        default=None,
        description="A stage that compiles native code against torch: where its "
        "prebuilt wheel may come from and how its source build is sized.",
    )

    @field_validator("script")
    @classmethod
    def _script_inside(cls, value: str | None) -> str | None:
        # run from verl's checkout: a path that could leave it would run any file on the machine
        return None if value is None else relative_path(value, "script path inside verl's checkout")

    option: Literal["tests"] | None = Field(
        default=None,
        description="Installed only when the run asks for this option (`--with-tests`): "
        "what verl's own test suite needs beyond verl's runtime.",
    )

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not STAGE_ID.match(value):
            msg = f"{value!r} is not a stage id (lower-case letters, digits and '-')"
            raise ValueError(msg)
        return value

    _expect_ranges = field_validator("expect")(_check_ranges)

    @field_validator("env")
    @classmethod
    def _env_no_code(cls, value: dict[str, str]) -> dict[str, str]:
        # a lockfile made from this stage carries its env to every lab member: the same rule
        for name in value:
            if never_allowed(name):
                msg = f"{name} may not be set in a stage's env (it names code, a search path, a "
                msg += "proxy or an installer setting); set it in your own shell instead"
                raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _kind_fields(self) -> Stage:
        if self.kind == "packages" and not self.packages and not self.variants:
            msg = "a 'packages' stage needs 'packages' (or per-variant packages)"
            raise ValueError(msg)
        if self.kind == "script" and not self.script:
            msg = "a 'script' stage needs 'script': a path inside verl's checkout"
            raise ValueError(msg)
        if self.kind != "script" and self.script:
            msg = f"'script' belongs to kind 'script', not {self.kind!r}"
            raise ValueError(msg)
        return self


class VerifySpec(Strict):
    """What `verify` proves about the env."""

    imports: tuple[str, ...] = ("verl", "verl.trainer.main_ppo", "torch", "ray")
    versions: dict[str, str] = Field(default_factory=dict)
    gpu_smoke: bool = True
    flash_attn: bool = False
    bf16: bool = True
    overridden: tuple[str, ...] = Field(
        default=(),
        description="Distributions whose requirements the stages override on purpose (verl's "
        "transformers pin over SGLang's): `uv pip check` mismatches on them warn, not fail.",
    )

    _version_ranges = field_validator("versions")(_check_ranges)


class Stack(Strict):
    """The stack one range of verl releases was made for (replaces fields of the profile)."""

    refs: tuple[str, ...] = Field(min_length=1)
    python: PythonSpec | None = None
    cuda_variants: dict[str, CudaVariant] | None = Field(
        default=None,
        description="Replaces the profile's variants: an older torch has fewer CUDA builds.",
    )
    stages: tuple[Stage, ...] | None = None
    verify: VerifySpec | None = None
    protected: tuple[str, ...] | None = None
    exclude_newer: date | None = Field(
        default=None,
        description="Only distributions uploaded before this day (UTC), so that what the stages "
        "leave unpinned resolves as it did when the release was made.",
    )
    note: str = ""

    @field_validator("cuda_variants")
    @classmethod
    def _variant_names(cls, value: dict[str, CudaVariant] | None) -> dict[str, CudaVariant] | None:
        return None if value is None else _check_variant_names(value)


class Profile(Strict):
    """A whole profile after `extends` has been merged."""

    schema_version: Literal[1]
    name: str
    description: str = ""
    extends: str | None = None
    verl: VerlSource = VerlSource()
    python: PythonSpec = PythonSpec()
    env: EnvSpec = EnvSpec()
    indexes: dict[str, IndexSpec] = Field(default_factory=dict)
    cuda_variants: dict[str, CudaVariant] = Field(default_factory=lambda: {"cpu": CudaVariant()})
    stages: tuple[Stage, ...]
    verify: VerifySpec = VerifySpec()
    protected: tuple[str, ...] = ()
    disk_gb: float = Field(default=5.0, gt=0)
    substitutions: tuple[Substitution, ...] = Field(
        default=(),
        description="Where this profile's variants install something other than verl's extras "
        "declare, each with its reason (applied where the stages take verl's extras).",
    )
    exclude_newer: date | None = Field(
        default=None,
        description="For the profile's own ref, as for a stack: only distributions uploaded "
        "before this day (UTC).",
    )
    uv_lock_extras: tuple[str, ...] = Field(
        default=(),
        description="The extras of verl's own uv.lock whose slice is this profile's stack at a "
        "verl ref that ships one and has no stack here (default: the verl-deps stage's extras).",
    )
    constraints: tuple[str, ...] = Field(
        default=(),
        description="Requirements every stage resolves under (exact pins, say): a ref whose stack "
        "is verl's uv.lock gets that lock's pins here.",
    )
    stacks: tuple[Stack, ...] = ()

    @field_validator("constraints")
    @classmethod
    def _constraint_lines(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for line in value:
            one_line(line, "a constraint")
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise ValueError(f"constraint {line!r} is not a requirement: {exc}") from None
        return value

    @field_validator("name")
    @classmethod
    def _name_shape(cls, value: str) -> str:
        # the name becomes the env's folder and the lockfile's folder: one safe file name
        if not PROFILE_NAME.fullmatch(value):
            msg = (
                f"{value!r} is not a profile name (letters, digits, '.', '_' and '-', starting "
                "with a letter or digit, at most 64)"
            )
            raise ValueError(msg)
        return value

    @field_validator("cuda_variants")
    @classmethod
    def _variant_names(cls, value: dict[str, CudaVariant]) -> dict[str, CudaVariant]:
        return _check_variant_names(value)

    @model_validator(mode="after")
    def _cross_checks(self) -> Profile:
        for number, sub in enumerate(self.substitutions):
            unknown = [v for v in sub.variants if v not in self.cuda_variants]
            if unknown:
                msg = (
                    f"substitution of {sub.replace!r}: unknown CUDA variant(s) "
                    f"{', '.join(unknown)}; name variants under 'cuda_variants'"
                )
                raise FieldError(msg, ("substitutions", number, "variants"))
        _check_stages(self.stages, self.cuda_variants, self, ("stages",), (self.verl.ref,))
        _check_overridden(self.verify, self.stages, ("verify", "overridden"))
        covered = {self.verl.ref}
        for number, stack in enumerate(self.stacks):
            twice = sorted(covered.intersection(stack.refs))
            if twice:
                msg = f"verl ref(s) {', '.join(twice)} already have a stack; a ref gets one stack"
                raise FieldError(msg, ("stacks", number, "refs"))
            covered.update(stack.refs)
            # A stack that keeps the profile's stages but not its variants checks them anew.
            stages: tuple[Stage, ...] = self.stages
            base: tuple[str | int, ...] = ("stages",)
            if stack.stages is not None:
                stages, base = (stack.stages, ("stacks", number, "stages"))
            variants = stack.cuda_variants or self.cuda_variants
            _check_stages(stages, variants, self, base, stack.refs)
            verify: VerifySpec = self.verify
            at: tuple[str | int, ...] = ("verify",)
            if stack.verify is not None:
                verify, at = (stack.verify, ("stacks", number, "verify"))
            _check_overridden(verify, stages, (*at, "overridden"))
        return self

    @property
    def gpu(self) -> bool:
        """A GPU profile has at least one CUDA variant besides 'cpu'."""
        return any(name != "cpu" for name in self.cuda_variants)


def _check_variant_names(value: dict[str, CudaVariant]) -> dict[str, CudaVariant]:
    for name in value:
        if not VARIANT_NAME.match(name):
            msg = f"{name!r} is not a CUDA variant (use 'cpu' or 'cuXYZ', e.g. 'cu130')"
            raise FieldError(msg, (name,))
    if not value:
        msg = "at least one CUDA variant is needed ('cpu' for a GPU-less profile)"
        raise ValueError(msg)
    return value


def _check_stages(
    stages: tuple[Stage, ...],
    variants: dict[str, CudaVariant],
    profile: Profile,
    base: tuple[str | int, ...],
    refs: tuple[str, ...],
) -> None:
    seen: set[str] = set()
    for position, stage in enumerate(stages):
        at = (*base, position)
        _check_stage_position(stage, at, seen)
        for name in stage.variants:
            if name not in variants:
                known = ", ".join(sorted(variants))
                msg = (
                    f"stage {stage.id!r}: unknown CUDA variant {name!r} (declared: {known}); "
                    "declare it under 'cuda_variants' or remove it from the stage"
                )
                raise FieldError(msg, (*at, "variants", name))
        prebuilt = stage.kernel.prebuilt_index if stage.kernel else None
        if prebuilt and prebuilt.index not in profile.indexes:
            msg = f"stage {stage.id!r}: index {prebuilt.index!r} is not declared under 'indexes'"
            raise FieldError(msg, (*at, "kernel", "prebuilt_index", "index"))
        if stage.index and stage.index not in profile.indexes:
            msg = f"stage {stage.id!r}: index {stage.index!r} is not declared under 'indexes'"
            raise FieldError(msg, (*at, "index"))
        seen.add(stage.id)
    _check_engines(stages, base, refs)


def _check_stage_position(stage: Stage, at: tuple[str | int, ...], seen: set[str]) -> None:
    if stage.kind == "install-verl":
        if seen:
            before = ", ".join(sorted(seen))
            msg = (
                f"stage(s) {before} come before install-verl: verl's editable install must "
                "precede every accelerator stage; move them after it"
            )
            raise FieldError(msg, (*at, "kind"))
        return
    if stage.id in RESERVED_STEP_IDS:
        msg = f"stage id {stage.id!r} is reserved for a built-in step; rename the stage"
        raise FieldError(msg, (*at, "id"))
    if stage.id in seen:
        msg = f"stage id {stage.id!r} appears twice; stage ids must be unique"
        raise FieldError(msg, (*at, "id"))
    for need in stage.needs:
        if need not in seen and need not in EARLIER_STEP_IDS:
            msg = (
                f"stage {stage.id!r} needs {need!r}, which is not an earlier stage "
                "(stages run in profile order; a later or missing stage would be a cycle)"
            )
            raise FieldError(msg, (*at, "needs"))


def _check_overridden(
    verify: VerifySpec, stages: tuple[Stage, ...], at: tuple[str | int, ...]
) -> None:
    """A mismatch `verify` may tolerate must come from an override some stage makes."""
    made = {
        _requirement_name(spec)
        for stage in stages
        for spec in (
            *stage.overrides,
            *(o for v in stage.variants.values() for o in v.overrides or ()),
        )
    }
    missing = [n for n in verify.overridden if _requirement_name(n) not in made]
    if missing:
        msg = (
            f"verify.overridden names {', '.join(missing)}, which no stage overrides; "
            "list only distributions a stage's 'overrides' pins"
        )
        raise FieldError(msg, at)


def _requirement_name(spec: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _engines_may_share(refs: tuple[str, ...]) -> bool:
    """Only releases before 0.9.1 (whose install script put both engines in one env) may."""
    found = [_RELEASE.match(ref) for ref in refs]
    return all(m is not None and Version(m.group(1)) < _ENGINES_SPLIT_AT for m in found)


def _check_engines(
    stages: tuple[Stage, ...], base: tuple[str | int, ...], refs: tuple[str, ...]
) -> None:
    """vLLM and SGLang pin different torch and transformers builds: never one env for both."""
    names: set[str] = set()
    for position, stage in enumerate(stages):
        specs = list(stage.packages)
        for variant in stage.variants.values():
            specs.extend(variant.packages or ())
        names.update(_requirement_name(s) for s in specs)
        names.update(f"extra:{e}" for e in stage.extras)
        found = [e for e in _ENGINES if e in names or f"extra:{e}" in names]
        if len(found) == len(_ENGINES) and not _engines_may_share(refs):
            msg = (
                f"stage {stage.id!r}: vLLM and SGLang are both installed for verl "
                f"{', '.join(refs)}: since verl 0.9.1 they need different torch and transformers "
                "pins and cannot share one env; use two profiles (e.g. fsdp and sglang)"
            )
            raise FieldError(msg, (*base, position, "extras" if stage.extras else "packages"))
