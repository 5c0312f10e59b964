"""Which source a kernel stage takes, first match wins: the lab wheelhouse, the profile's prebuilt
sources (release wheels whose names encode the key; an index whose key the profile states), and
a source build last. Pure: the plan and the run both call it, with the key they know.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from verl_bootstrap.kernels.key import BuildKey, render_template
from verl_bootstrap.kernels.wheelhouse import Entry
from verl_bootstrap.profile.kernel import KernelSpec

__all__ = ["KernelChoice", "choose_source", "pinned_version", "wheelhouse_match"]


@dataclass(frozen=True)
class KernelChoice:
    """The source, where its wheel is (path or URL), and why it was chosen."""

    source: str  # wheelhouse | release | index | build
    reason: str
    wheel: str | None = None
    sha256: str | None = None
    built_for: BuildKey | None = None  # the key the wheel's source states


def pinned_version(packages: Sequence[str], distribution: str) -> str | None:
    """The `==` version the stage pins for the kernel's distribution."""
    wanted = canonicalize_name(distribution)
    for spec in packages:
        try:
            req = Requirement(spec)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == wanted:
            pins = [s.version for s in req.specifier if s.operator in {"==", "==="}]
            return pins[0] if pins else None
    return None


def choose_source(
    kernel: KernelSpec,
    version: str | None,
    key: BuildKey,
    wheelhouse: Sequence[Entry],
    wheelhouse_root: str | None,
) -> KernelChoice:
    """The first source with a wheel for (distribution, version, key), else a source build."""
    name = kernel.distribution
    if version is None:
        reason = f"as the stage installs it (it pins no exact version of {name}), sized build"
        return KernelChoice("stage", reason)
    why_not: list[str] = []
    entry = wheelhouse_match(kernel, version, key, wheelhouse, why_not)
    if entry is not None:
        where = f"{wheelhouse_root}/{entry.file}" if wheelhouse_root else entry.file
        reason = (
            f"prebuilt from the lab wheelhouse, built for {entry.key.describe()}, "
            f"sha256 {entry.sha256[:12]}…"
        )
        return KernelChoice("wheelhouse", reason, where, entry.sha256, entry.key)
    for template in kernel.release_wheels:
        url = render_template(template, version, key)
        if url is not None:
            reason = f"prebuilt release wheel for {key.describe()} if the release has one ({url})"
            return KernelChoice("release", reason, url, built_for=key)
    index = _from_index(kernel, key, why_not)
    if index is not None:
        return index
    return KernelChoice("build", f"source build: {'; '.join(why_not)}")


def wheelhouse_match(
    kernel: KernelSpec, version: str, key: BuildKey, entries: Sequence[Entry], why_not: list[str]
) -> Entry | None:
    """The wheelhouse's wheel of (kernel, version) for `key`; else None, with why in `why_not`."""
    wanted = canonicalize_name(kernel.distribution)
    same = [e for e in entries if canonicalize_name(e.name) == wanted and e.version == version]
    for entry in same:
        if not entry.key.mismatches(key):
            return entry
    if same:
        others = "; ".join(f"{e.key.describe()} ({', '.join(e.key.mismatches(key))})" for e in same)
        why_not.append(
            f"the lab wheelhouse has {kernel.distribution} {version} only for other builds: "
            + others
        )
    else:
        why_not.append(
            f"no wheel in the lab wheelhouse matches {kernel.distribution} {version} "
            f"for {key.describe()}"
        )
    return None


def _from_index(kernel: KernelSpec, key: BuildKey, why_not: list[str]) -> KernelChoice | None:
    prebuilt = kernel.prebuilt_index
    if prebuilt is None:
        return None
    stated = BuildKey.from_mapping(prebuilt.key)
    problems = stated.mismatches(key)
    if problems:
        why_not.append(f"index {prebuilt.index!r} is built for {stated.describe()}, not this env")
        return None
    reason = f"prebuilt from index {prebuilt.index!r}, which the profile states is built for " + (
        stated.describe()
    )
    return KernelChoice("index", reason, built_for=stated)
