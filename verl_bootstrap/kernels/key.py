"""The build key: what a compiled extension must share with the torch it is loaded into.

A wheel built against one torch (or C++ ABI, or Python) imports in another with `undefined
symbol`; the key is what makes that visible before installing. Fields a source does not state
are None, and a None is never taken as a match.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["FIELDS", "BuildKey", "render_template"]

FIELDS = ("torch", "cuda", "cxx11abi", "python", "platform")


@dataclass(frozen=True)
class BuildKey:
    """torch's public version, its CUDA ('13.0', or 'cpu'), C++11 ABI, Python tag, platform."""

    torch: str | None = None
    cuda: str | None = None
    cxx11abi: bool | None = None
    python: str | None = None
    platform: str | None = None

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> BuildKey:
        """From an index entry, a stated key or the probe's answer (extra keys ignored)."""
        abi = data.get("cxx11abi")
        if isinstance(abi, str):
            abi = abi.strip().upper() in {"TRUE", "1", "YES"}
        return cls(
            torch=_text(data.get("torch")),
            cuda=_text(data.get("cuda")),
            cxx11abi=abi if isinstance(abi, bool) else None,
            python=_text(data.get("python")),
            platform=_text(data.get("platform")),
        )

    def to_json(self) -> dict[str, Any]:
        """The key as an index entry stores it."""
        return asdict(self)

    @property
    def cuda_major(self) -> str | None:
        """'13' for CUDA 13.0; 'cpu' for a CPU torch."""
        return None if self.cuda is None else self.cuda.split(".", 1)[0]

    @property
    def complete(self) -> bool:
        """Every field is known."""
        return all(getattr(self, name) is not None for name in FIELDS)

    def describe(self) -> str:
        """'torch 2.11.0+cu130, cp312, cxx11abi, linux_x86_64' (unknown fields as '?')."""
        tag = "cpu" if self.cuda == "cpu" else f"cu{(self.cuda or '?').replace('.', '')}"
        abi = {True: "cxx11abi", False: "pre-cxx11 abi", None: "abi ?"}[self.cxx11abi]
        return (
            f"torch {self.torch or '?'}+{tag}, {self.python or '?'}, {abi}, {self.platform or '?'}"
        )

    def mismatches(self, env: BuildKey) -> list[str]:
        """The fields where this (a wheel's) key differs from the env's or does not say."""
        out = []
        for name in FIELDS:
            mine, theirs = getattr(self, name), getattr(env, name)
            if mine is None:
                out.append(f"{name} not stated")
            elif not _same(name, mine, theirs):
                out.append(f"{name} {_show(mine)} (env: {_show(theirs)})")
        return out


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _show(value: object) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return str(value)


def _same(name: str, mine: object, theirs: object) -> bool:
    """Equal, where a release name's coarser field (torch 2.8, CUDA 12) covers the finer one."""
    if theirs is None:
        return False
    if name == "torch" and str(mine).count(".") == 1:
        return ".".join(str(theirs).split(".")[:2]) == mine
    if name == "cuda" and "." not in str(mine) and mine != "cpu":
        return str(theirs).split(".", 1)[0] == mine
    return mine == theirs


def render_template(template: str, version: str, key: BuildKey) -> str | None:
    """The URL of the release wheel for `key`; None when the key lacks a field it needs."""
    values = {
        "version": version,
        "torch": key.torch,
        "torch_minor": None if key.torch is None else ".".join(key.torch.split(".")[:2]),
        "cuda_major": key.cuda_major,
        "cxx11abi": None if key.cxx11abi is None else ("TRUE" if key.cxx11abi else "FALSE"),
        "python": key.python,
        "platform": key.platform,
    }
    used = set(re.findall(r"\{([a-z][a-z0-9_]*)\}", template))
    if any(values.get(name) is None for name in used):
        return None
    return re.sub(r"\{([a-z][a-z0-9_]*)\}", lambda m: str(values[m.group(1)]), template)
