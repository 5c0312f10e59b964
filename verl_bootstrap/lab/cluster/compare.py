"""Compare what every node reported: each difference named, each failed check listed.

For every fingerprint field the value most nodes share is the reference (the first node's on a
tie); each node that differs gets a difference saying how, down to the distribution.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

__all__ = [
    "FIELDS",
    "ClusterReport",
    "Difference",
    "compare",
    "node_failures",
    "train_failures",
]

Answer = Mapping[str, Any]
# (key in the node report, what the table calls it)
FIELDS: tuple[tuple[str, str], ...] = (
    ("lock_sha256", "lockfile"),
    ("dists_digest", "distributions"),
    ("verl_commit", "verl commit"),
    ("python", "python"),
    ("driver", "driver"),
    ("gpus", "GPUs"),
    ("shm_bytes", "/dev/shm"),
    ("cuda_libraries", "CUDA libraries"),
)


@dataclass(frozen=True)
class Difference:
    """One way one node differs from the others."""

    node: str
    field: str
    detail: str


@dataclass(frozen=True)
class ClusterReport:
    """Every node's answer, the differences between them, and the checks that failed."""

    nodes: tuple[Answer, ...]
    differences: tuple[Difference, ...]
    failures: tuple[tuple[str, str], ...]  # (node, what failed)

    @property
    def ok(self) -> bool:
        """Every node answered, passed its checks, and matches the others."""
        return bool(self.nodes) and not self.differences and not self.failures

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form."""
        return {
            "ok": self.ok,
            "nodes": [dict(n) for n in self.nodes],
            "differences": [d.__dict__ for d in self.differences],
            "failures": [{"node": n, "failure": f} for n, f in self.failures],
        }


def label(answer: Answer) -> str:
    """How the table names a node."""
    return str(answer.get("label") or answer.get("host") or "?")


def _key(value: Any) -> str:
    return repr(value)


def _reference(answers: Sequence[Answer], field: str) -> Answer:
    counts = Counter(_key(a.get(field)) for a in answers)
    best = max(counts.values())
    return next(a for a in answers if counts[_key(a.get(field))] == best)


def _dist_detail(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> str:
    parts = [f"+ {n} {mine[n][0]}" for n in sorted(set(mine) - set(theirs))]
    parts += [f"- {n} {theirs[n][0]} (missing here)" for n in sorted(set(theirs) - set(mine))]
    for name in sorted(set(mine) & set(theirs)):
        if mine[name][0] != theirs[name][0]:
            parts.append(f"{name} {mine[name][0]} (others: {theirs[name][0]})")
        elif mine[name][1] != theirs[name][1]:
            parts.append(f"{name} {mine[name][0]} rebuilt or reinstalled (its RECORD differs)")
    return "; ".join(parts) or "same names and versions, different digest"


def _list_detail(mine: Sequence[Any], theirs: Sequence[Any]) -> str:
    extra = [f"+ {v}" for v in mine if v not in theirs]
    missing = [f"- {v}" for v in theirs if v not in mine]
    return "; ".join(extra + missing) or f"{list(mine)} (others, in another order: {list(theirs)})"


def _detail(field: str, mine: Answer, reference: Answer) -> str:
    if field == "dists_digest":
        return _dist_detail(mine.get("distributions") or {}, reference.get("distributions") or {})
    value, other = mine.get(field), reference.get(field)
    if isinstance(value, list) and isinstance(other, list):
        return _list_detail(value, other)
    return f"{value} (others: {other})"


def _differences(answers: Sequence[Answer]) -> list[Difference]:
    found = []
    usable = [a for a in answers if not a.get("error")]
    for field, name in FIELDS:
        if len({_key(a.get(field)) for a in usable}) < 2:
            continue
        reference = _reference(usable, field)
        for answer in usable:
            if _key(answer.get(field)) != _key(reference.get(field)):
                found.append(Difference(label(answer), name, _detail(field, answer, reference)))
    return found


def node_failures(answer: Answer, versions: Mapping[str, str]) -> list[str]:
    """What failed on one node: no env, a failed import, a wrong version, the GPU check."""
    if answer.get("error"):
        return [str(answer["error"])]
    verify = answer.get("verify") or {}
    failed = [
        f"import {i['module']}: {i['error']}" for i in verify.get("imports", []) if not i["ok"]
    ]
    have = verify.get("versions", {})
    for name, wanted in sorted(versions.items()):
        if not _satisfies(have.get(name), wanted):
            failed.append(f"version {name}: {have.get(name)} (wanted {wanted})")
    if (verify.get("gpu") or {}).get("status") == "fail":
        failed.append(f"gpu smoke test: {verify['gpu'].get('detail')}")
    return failed + train_failures(answer.get("train"))


def train_failures(train: Any) -> list[str]:
    """What failed in a node's training step (`cluster verify --train`): each check that did not
    pass, with the part it names, or why the level did not run."""
    if not isinstance(train, Mapping) or train.get("ok"):
        return []
    what = f"training step ({train.get('level') or '?'})"
    if train.get("error"):
        return [f"{what}: {train['error']}"]
    checks = [c for c in train.get("checks") or [] if c.get("status") != "ok"]
    said = [f"{what}: {c.get('name')}: {c.get('detail')}" for c in checks]
    return said or [f"{what}: no check passed"]


def _satisfies(version: str | None, wanted: str) -> bool:
    try:
        return version is not None and version in SpecifierSet(wanted, prereleases=True)
    except InvalidSpecifier:
        return False


def compare(
    answers: Sequence[Answer],
    versions: Mapping[str, str],
    *,
    namer: Callable[[Answer], str] = label,
) -> ClusterReport:
    """Name every difference between the nodes and every failed check."""
    names = [namer(a) for a in answers]
    unique = [n if names.count(n) == 1 else f"{n}#{i}" for i, n in enumerate(names)]
    named = [{**a, "label": name} for a, name in zip(answers, unique, strict=True)]
    failures = [(label(a), f) for a in named for f in node_failures(a, versions)]
    return ClusterReport(tuple(named), tuple(_differences(named)), tuple(failures))
