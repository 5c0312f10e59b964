"""The environment variables a lockfile may set on an install: known build variables only.

A lockfile is shared (a lab's `lockfiles:` folder or URL), and a stage's `env:` reaches the
installer and every build it runs. A variable that names a program, a library or a search path
(`LD_PRELOAD`, `PYTHONPATH`, `PATH`, `CC`, a proxy) would run or redirect code as the user, so a
lockfile may set only the build knobs the tool's own profiles use, each with a value of its
shape (a number, an arch list, a flag word, a date).

Whether a lockfile may set a variable at all is then the profile's word: a variable the
profile's own stage sets may only be set to the same value (FLASH_ATTENTION_FORCE_BUILD=FALSE
where the profile says TRUE would let flash-attn's setup.py download an unhashed wheel), and
what a lockfile may set on its own is sizing alone (jobs, threads, GPU architectures), which
changes how long a build takes, never what it builds from. The profile is the user's, and its
env is in the profile hash.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = ["BUILD_VARIABLES", "SIZING", "never_allowed", "not_covered", "value_problem"]

_COUNT = re.compile(r"^[0-9]{1,4}$")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9;,.+_-]{0,63}$")  # a flag or an arch list: no path
_SWITCH = re.compile(r"^(0|1|TRUE|FALSE|true|false|True|False|ON|OFF|yes|no)$")
_ARCHS = re.compile(r"^[0-9]{1,3}\.[0-9][af]?(\+PTX)?([; ][0-9]{1,3}\.[0-9][af]?(\+PTX)?){0,31}$")
_DAY = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9:.]{2,15}(Z|[+-][0-9:]{2,5})?)?$")

# name -> the shape of its value; names ending in "*" are a family (the prefix before it)
BUILD_VARIABLES: Final[dict[str, re.Pattern[str]]] = {
    "MAX_JOBS": _COUNT,
    "NVCC_THREADS": _COUNT,
    "CMAKE_BUILD_PARALLEL_LEVEL": _COUNT,
    "TORCH_CUDA_ARCH_LIST": _ARCHS,
    "NVTE_FRAMEWORK": re.compile(r"^[a-z]{1,16}(,[a-z]{1,16}){0,3}$"),
    "NVTE_CUDA_ARCHS": _WORD,
    "FLASH_ATTN_*": _WORD,
    "FLASH_ATTENTION_*": _WORD,
    "USE_MEGATRON": _SWITCH,
    "USE_SGLANG": _SWITCH,
    "UV_EXCLUDE_NEWER": _DAY,
    "PIP_UPLOADED_PRIOR_TO": _DAY,
}

# What a lockfile may set where the profile's stage does not: how many jobs and threads a build
# runs, and for which GPU architectures (kernels/sizing.py sets the same ones for this host).
SIZING: Final = frozenset(
    {
        "MAX_JOBS",
        "NVCC_THREADS",
        "CMAKE_BUILD_PARALLEL_LEVEL",
        "TORCH_CUDA_ARCH_LIST",
        "NVTE_CUDA_ARCHS",
        "FLASH_ATTN_CUDA_ARCHS",
    }
)

# Never from a lockfile, whatever the profile says: loaders, interpreters' search paths and
# start-up hooks, PATH-like lists, proxies and the installers' own settings.
_NEVER = re.compile(
    r"^(LD_|DYLD_|PYTHON|PIP_|UV_|CONDA|MAMBA|GIT_|SSL_|CURL_|REQUESTS_|BASH_|NETRC|HOME$|ENV$|"
    r"SHELL|PS4$|IFS$|TMPDIR$|XDG_)|PATH|PROXY",
    re.IGNORECASE,
)


def _shape_of(name: str) -> re.Pattern[str] | None:
    if name in BUILD_VARIABLES:
        return BUILD_VARIABLES[name]
    family = next((k for k in BUILD_VARIABLES if k.endswith("*") and name.startswith(k[:-1])), "")
    return BUILD_VARIABLES.get(family)


def never_allowed(name: str) -> bool:
    """A variable no lockfile may set (a known build variable never is one)."""
    return _shape_of(name) is None and bool(_NEVER.search(name))


def value_problem(name: str, value: str) -> str | None:
    """Why a lockfile may not set `name` to `value` whatever the profile says; None: it may,
    as far as the lockfile alone tells (an unknown variable still needs the profile)."""
    if never_allowed(name):
        return (
            f"{name} may not be set by a lockfile (it names code, a search path, a proxy or an "
            "installer setting)"
        )
    shape = _shape_of(name)
    if shape is not None and not shape.match(value):
        return f"{name}={value!r} is not a value of its shape ({shape.pattern})"
    return None


def not_covered(env: Mapping[str, str], profile_env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each variable of a locked stage's `env` the lockfile may not set, with why (name, why):
    one the profile's own stage sets to another value, or one it does not set that is not
    sizing."""
    found = []
    for name, value in sorted(env.items()):
        if name in profile_env and profile_env[name] != value:
            found.append((name, f"{name}={value!r} where the profile sets {profile_env[name]!r}"))
        elif name not in profile_env and name not in SIZING:
            why = f"{name}, which the profile's stage does not set and is not sizing"
            found.append((name, why))
    return found
