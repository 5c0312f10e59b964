"""The node table that `cluster verify` prints: one row per node, differing cells marked `≠`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verl_bootstrap.cluster.compare import FIELDS, ClusterReport

__all__ = ["table_text"]

_GIB = 1024**3


def _short(value: Any) -> str:
    return str(value)[:8] if value else "-"


def _count(value: Any) -> str:
    return str(len(value)) if isinstance(value, list) else "-"


def _gib(value: Any) -> str:
    return f"{value / _GIB:.0f}G" if isinstance(value, int) else "-"


_CELLS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "lock_sha256": ("LOCK", _short),
    "dists_digest": ("DISTS", _short),
    "verl_commit": ("VERL", _short),
    "python": ("PYTHON", lambda v: str(v or "-")),
    "driver": ("DRIVER", lambda v: str(v or "-")),
    "gpus": ("GPUS", _count),
    "shm_bytes": ("SHM", _gib),
    "cuda_libraries": ("CUDA-LIBS", _count),
}


def _row(node: Mapping[str, Any], report: ClusterReport) -> list[str]:
    name = str(node["label"])
    differing = {d.field for d in report.differences if d.node == name}
    failed = any(n == name for n, _ in report.failures)
    cells = [name, "FAIL" if failed else "ok"]
    for key, title in FIELDS:
        header, render = _CELLS[key]
        del header
        cells.append(render(node.get(key)) + (" ≠" if title in differing else ""))
    return cells


def table_text(report: ClusterReport) -> str:
    """The table, then every difference and failure in words, then the verdict."""
    rows = [["NODE", "CHECKS", *(_CELLS[k][0] for k, _ in FIELDS)]]
    rows += [_row(node, report) for node in report.nodes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if report.differences:
        lines.append("differences:")
        lines += [f"  {d.node}: {d.field}: {d.detail}" for d in report.differences]
    if report.failures:
        lines.append("failed checks:")
        lines += [f"  {node}: {failure}" for node, failure in report.failures]
    count = len(report.nodes)
    lines.append(
        f"all {count} nodes match and pass" if report.ok else f"the {count} nodes do NOT match"
    )
    return "\n".join(lines)
