"""The `kernel:` block of a profile stage: a stage that compiles native code against torch.

Everything here is data: which distribution is the kernel, which compiled modules must load
after the stage, where prebuilt wheels may come from, and which variables size its source build.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PLACEHOLDERS", "THREADS_VARIABLES", "KernelSpec", "PrebuiltIndex", "check_template"]

# The placeholders a release-wheel pattern may use (flash-attn names its assets with these);
# kernels.key renders them for an env's build key.
PLACEHOLDERS = ("version", "torch", "torch_minor", "cuda_major", "cxx11abi", "python", "platform")
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
    build_minutes: float | None = Field(
        default=None,
        gt=0,
        description="About how long a source build takes, per architecture, "
        "on 16 cores (for the plan's estimate).",
    )

    @field_validator("threads_variable")
    @classmethod
    def _threads(cls, value: str | None) -> str | None:
        if value is not None and value not in THREADS_VARIABLES:
            raise ValueError(f"must be one of {', '.join(THREADS_VARIABLES)}, not {value!r}")
        return value

    @field_validator("release_wheels")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_template(v) for v in value)


def check_template(template: str) -> str:
    """A profile's release-wheel pattern names only known placeholders (a validator calls this)."""
    for name in re.findall(r"\{([a-z][a-z0-9_]*)\}", template):
        if name not in PLACEHOLDERS:
            known = ", ".join(sorted(PLACEHOLDERS))
            raise ValueError(f"unknown placeholder {{{name}}} (known: {known})")
    return template
