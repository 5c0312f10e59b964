"""The build key: what a compiled extension must share with the torch it is loaded into.

A wheel built against one torch (or C++ ABI, or Python) imports in another with `undefined
symbol`; the key is what makes that visible before installing. Fields a source does not state
are None, and a None is never taken as a match.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from verl_bootstrap.profile.kernel import KEY_FIELDS

__all__ = ["FIELDS", "BuildKey", "parse_wheel_name", "render_template"]

FIELDS = KEY_FIELDS
# What each placeholder matches in a wheel's file name (profile.kernel.PLACEHOLDERS names them).
_MATCHES = {
    "version": r"[0-9][0-9A-Za-z.]*",
    "torch": r"[0-9]+\.[0-9]+(?:\.[0-9]+)?",
    "torch_minor": r"[0-9]+\.[0-9]+",
    "cuda_major": r"[0-9]+|cpu",
    "cuda_tag": r"cu[0-9]{3,4}|cpu",
    "cxx11abi": r"TRUE|FALSE",
    "python": r"cp[0-9]+",
    "platform": r"[a-z0-9_]+",
    "tag": r"[A-Za-z0-9._-]+",
}


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

    def stated_over(self, base: BuildKey) -> BuildKey:
        """`base` with this key's known fields written over it (a source's stated fields over
        what a wheel's name says)."""
        known = {k: v for k, v in asdict(self).items() if v is not None}
        return replace(base, **known)

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


def _pattern(template: str) -> re.Pattern[str]:
    """A release-wheel file-name template as a regular expression (a repeated field must agree)."""
    out, seen, at = [], set(), 0
    for match in re.finditer(r"\{([a-z][a-z0-9_]*)\}", template):
        out.append(re.escape(template[at : match.start()]))
        name = match.group(1)
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{_MATCHES[name]})")
        seen.add(name)
        at = match.end()
    out.append(re.escape(template[at:]))
    return re.compile("".join(out))


def parse_wheel_name(template: str, filename: str) -> tuple[str, BuildKey] | None:
    """(version, key) read from a release wheel's file name (the pattern's last part); None
    when it does not fit. A field the name does not state stays None."""
    match = _pattern(template.rsplit("/", 1)[-1]).fullmatch(filename)
    if match is None:
        return None
    got = match.groupdict()
    tag = got.get("cuda_tag")
    key = BuildKey(
        torch=got.get("torch") or got.get("torch_minor"),
        cuda=_tag_cuda(tag) if tag else got.get("cuda_major"),
        cxx11abi=None if "cxx11abi" not in got else got["cxx11abi"] == "TRUE",
        python=got.get("python"),
        platform=got.get("platform"),
    )
    return got.get("version", ""), key


def _tag_cuda(tag: str) -> str:
    """'13.0' for cu130, 'cpu' for cpu."""
    digits = tag.removeprefix("cu")
    return "cpu" if tag == "cpu" else f"{digits[:-1]}.{digits[-1]}"


def _cuda_tag(cuda: str | None) -> str | None:
    """'cu130' for CUDA 13.0, 'cpu' for a CPU torch (None: unknown)."""
    if cuda is None or cuda == "cpu":
        return cuda
    return "cu" + cuda.replace(".", "")


def render_template(template: str, version: str, key: BuildKey) -> str | None:
    """The URL of the release wheel for `key`; None when the key lacks a field it needs (or the
    pattern has a {tag}, which only a recorded list names)."""
    values = {
        "version": version,
        "torch": key.torch,
        "torch_minor": None if key.torch is None else ".".join(key.torch.split(".")[:2]),
        "cuda_major": key.cuda_major,
        "cuda_tag": _cuda_tag(key.cuda),
        "cxx11abi": None if key.cxx11abi is None else ("TRUE" if key.cxx11abi else "FALSE"),
        "python": key.python,
        "platform": key.platform,
    }
    used = set(re.findall(r"\{([a-z][a-z0-9_]*)\}", template))
    if any(values.get(name) is None for name in used):
        return None
    return re.sub(r"\{([a-z][a-z0-9_]*)\}", lambda m: str(values[m.group(1)]), template)
