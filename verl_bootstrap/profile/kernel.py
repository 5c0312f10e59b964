"""The `kernel:` block of a profile stage: a stage that compiles native code against torch.

Everything here is data: which distribution is the kernel, which compiled modules must load
after the stage, where prebuilt wheels may come from, and which variables size its source build.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from verl_bootstrap.safety.shapes import PACKAGE_NAME

__all__ = [
    "KEY_FIELDS",
    "PLACEHOLDERS",
    "THREADS_VARIABLES",
    "TRUST_LEVELS",
    "KernelSpec",
    "PrebuiltIndex",
    "PrebuiltSource",
    "check_template",
]

# The placeholders a release-wheel pattern may use (flash-attn names its assets with these);
# kernels.key renders them for an env's build key. cuda_tag is torch's own local tag (cu130,
# cpu), as the community wheelhouse names its builds; tag is a release's tag, which only a
# recorded list names.
PLACEHOLDERS = (
    "version",
    "torch",
    "torch_minor",
    "cuda_major",
    "cuda_tag",
    "cxx11abi",
    "python",
    "platform",
    "tag",
)
# The fields of a build key (kernels.key.BuildKey) a source may state for its wheels.
KEY_FIELDS = ("torch", "cuda", "cxx11abi", "python", "platform")
# How far a source's wheels are trusted, most first: the lab's own builds; the project that
# makes the kernel; the project that uses it (verl) and states the key; a third party's builds.
TRUST_LEVELS = ("lab", "upstream", "project", "community")
Trust = Literal["upstream", "project", "community"]
# Variables through which a build runs several of nvcc's per-architecture passes at once inside
# one compile job (see kernels.sizing: verl-bootstrap sets them to 1).
THREADS_VARIABLES = ("NVCC_THREADS",)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrebuiltIndex(_Strict):
    """A named index (from `indexes`) serving prebuilt wheels whose names do not state a key."""

    index: str = Field(description="Name of an index from the profile's `indexes`.")
    key: dict[str, str] = Field(
        description="The build key its wheels were built for (torch, cuda, cxx11abi, python, "
        "platform); they are used only for an env with exactly this key."
    )


class PrebuiltSource(_Strict):
    """One place a kernel's prebuilt wheels come from, declared as data (in order of trust)."""

    id: str = Field(
        pattern=r"^[a-z][a-z0-9-]*$",
        description="Its name, as `kernel_sources:` in a site config and the recorded list say it "
        "(official, verl-wheelhouse, community).",
    )
    trust: Trust = Field(
        description="upstream (the kernel's own releases), project (verl's builds), community"
    )
    about: str = Field(default="", description="Who publishes it, in a few words.")
    release: str | None = Field(
        default=None,
        description="URL pattern of release assets whose names state the build, with "
        "{version} {torch} {torch_minor} {cuda_major} {cuda_tag} {cxx11abi} {python} "
        "{platform}; {tag} (a release tag) comes from the recorded list.",
    )
    index: str | None = Field(
        default=None, description="A simple (PEP 503) index URL whose wheels do not state a key."
    )
    key: dict[str, str] = Field(
        default_factory=dict,
        description="What its wheels are built for that their names do not say (verl's "
        "wheelhouse: torch, cuda, cxx11abi; a community build's cxx11abi).",
    )
    distribution: str | None = Field(
        default=None,
        description="The distribution its wheel is, when not the kernel's (a whole "
        "transformer-engine wheel for the transformer-engine-torch kernel); the stage pins it.",
    )
    replaces: tuple[str, ...] = Field(
        default=(),
        description="With `distribution`: the stage's other distributions that whole wheel "
        "holds (TransformerEngine's core library), left out where a lockfile's install takes it "
        "(the kernel's own distribution is left out anyway).",
    )

    @field_validator("release")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return None if value is None else check_template(value)

    @field_validator("key")
    @classmethod
    def _key(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(KEY_FIELDS))
        if unknown:
            raise ValueError(f"unknown key field(s) {unknown} (known: {', '.join(KEY_FIELDS)})")
        return value

    @field_validator("replaces")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [n for n in value if not PACKAGE_NAME.match(n)]
        if bad:
            raise ValueError(f"not a distribution name: {bad[0]!r}")
        return value

    @model_validator(mode="after")
    def _one_layout(self) -> PrebuiltSource:
        if (self.release is None) == (self.index is None):
            raise ValueError("a source has exactly one of `release` (a URL pattern) or `index`")
        if self.replaces and self.distribution is None:
            raise ValueError("`replaces` needs `distribution` (the whole wheel that holds them)")
        return self


class KernelSpec(_Strict):
    """How a kernel stage finds or builds its wheel."""

    distribution: str = Field(description="The compiled distribution, e.g. flash-attn.")
    modules: tuple[str, ...] = Field(
        default=(),
        description="Compiled extension modules loaded after the stage (flash_attn_2_cuda).",
    )
    release_wheels: tuple[str, ...] = Field(
        default=(),
        description="URL patterns of release wheels whose file names encode the build key, with "
        "{version} {torch} {torch_minor} {cuda_major} {cxx11abi} {python} {platform}.",
    )
    prebuilt_index: PrebuiltIndex | None = None
    sources: tuple[PrebuiltSource, ...] = Field(
        default=(),
        description="Every prebuilt source the stage may take, most trusted first, after the lab "
        "wheelhouse (a site config's `kernel_sources:` turns them off or reorders).",
    )
    arch_variables: tuple[str, ...] = Field(
        default=("TORCH_CUDA_ARCH_LIST",),
        description="Variables through which the build reads the GPU architectures.",
    )
    threads_variable: str | None = Field(
        default=None,
        description="The variable through which the build runs several per-architecture nvcc "
        "passes inside one compile job (flash-attn: NVCC_THREADS, default 4 there). "
        "verl-bootstrap sets it to 1, so that a job is one pass and MAX_JOBS, sized at "
        "job_ram_gb a job, keeps the cores busy without running out of memory.",
    )
    job_ram_gb: float = Field(
        default=4.0, gt=0, description="RAM one compile job (one nvcc pass) may take."
    )
    on_index: str = Field(
        default="",
        description="What the default index serves of the distribution, where that is no "
        "prebuilt wheel (the plan and `kernels coverage` say it with a build's reason), e.g. "
        "'the default index has transformer-engine-torch only as an sdist'.",
    )
    build_minutes: float | None = Field(
        default=None,
        gt=0,
        description="About how long a source build takes on 16 cores, per GPU architecture "
        "where it compiles device code for each (`build_per_arch`), else in all (for the plan's "
        "estimate); say in a comment what measured it.",
    )
    build_measured: str = Field(
        default="",
        max_length=200,
        description="What measured `build_minutes`, as the plan cites it beside its estimate "
        "(e.g. '1618 CPU-s for the whole build, bench/bench_te_build.py').",
    )
    build_per_arch: bool = Field(
        default=True,
        description="Whether the build's work grows with each GPU architecture (CUDA device "
        "code, as flash-attn's); false for an extension of host code alone, whose build takes "
        "as long for any list (TransformerEngine's torch extension: C++ against torch's and "
        "CUDA's headers, compiled by the host compiler).",
    )

    @field_validator("threads_variable")
    @classmethod
    def _threads(cls, value: str | None) -> str | None:
        if value is not None and value not in THREADS_VARIABLES:
            raise ValueError(f"must be one of {', '.join(THREADS_VARIABLES)}, not {value!r}")
        return value

    @field_validator("sources")
    @classmethod
    def _unique(cls, value: tuple[PrebuiltSource, ...]) -> tuple[PrebuiltSource, ...]:
        ids = [s.id for s in value]
        twice = sorted({i for i in ids if ids.count(i) > 1} | ({"wheelhouse"} & set(ids)))
        if twice:
            raise ValueError(f"source id(s) {twice} named twice (or 'wheelhouse', the lab's)")
        return value

    @field_validator("release_wheels")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_template(v) for v in value)

    def url_prefixes(self, index_urls: Mapping[str, str]) -> tuple[str, ...]:
        """Where the declared sources' wheels lie: each release pattern up to its first
        placeholder, each index's scheme and host (and, for a GitHub Pages index, the release
        assets of the same repository, which such an index links). `index_urls`: the profile's
        named indexes (a `prebuilt_index` names one)."""
        found = [t.split("{", 1)[0] for t in self.release_wheels]
        found += [s.release.split("{", 1)[0] for s in self.sources if s.release]
        indexes = [s.index for s in self.sources if s.index]
        if self.prebuilt_index and self.prebuilt_index.index in index_urls:
            indexes.append(index_urls[self.prebuilt_index.index])
        for url in indexes:
            found.extend(_index_prefixes(url))
        return tuple(found)


def _index_prefixes(url: str) -> list[str]:
    parsed = urlsplit(url)
    found = [f"{parsed.scheme}://{parsed.netloc}/"]
    owner = parsed.netloc.removesuffix(".github.io")
    repo = parsed.path.strip("/").split("/", 1)[0]
    if owner != parsed.netloc and repo:
        found.append(f"https://github.com/{owner}/{repo}/releases/download/")
    return found


def check_template(template: str) -> str:
    """A profile's release-wheel pattern names only known placeholders (a validator calls this)."""
    for name in re.findall(r"\{([a-z][a-z0-9_]*)\}", template):
        if name not in PLACEHOLDERS:
            known = ", ".join(sorted(PLACEHOLDERS))
            raise ValueError(f"unknown placeholder {{{name}}} (known: {known})")
    return template
