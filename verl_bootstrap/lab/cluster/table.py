"""The node table that `cluster verify` prints: one row per node, differing cells marked `≠`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from verl_bootstrap.lab.cluster.compare import FIELDS, ClusterReport

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


def _row(node: Mapping[str, Any], report: ClusterReport, *, trained: bool) -> list[str]:
    name = str(node["label"])
    differing = {d.field for d in report.differences if d.node == name}
    failed = any(n == name for n, _ in report.failures)
    cells = [name, "FAIL" if failed else "ok"]
    if trained:
        train = node.get("train")
        cells.append("-" if not isinstance(train, Mapping) else "ok" if train.get("ok") else "FAIL")
    for key, title in FIELDS:
        header, render = _CELLS[key]
        del header
        cells.append(render(node.get(key)) + (" ≠" if title in differing else ""))
    return cells


def _figure(value: Any, form: str) -> str:
    return format(value, form) if isinstance(value, int | float) else "-"


def _train_line(node: Mapping[str, Any]) -> str:
    """One node's training step in figures: loss, weights changed, log-prob agreement."""
    train = node.get("train") or {}
    if train.get("error"):
        return f"  {node['label']}: FAIL, {train['error']}"
    fig = train.get("figures") or {}
    if not fig:  # it stopped before a step: the failed checks below say where
        failed = [str(c.get("name")) for c in train.get("checks") or [] if c.get("status") != "ok"]
        return f"  {node['label']}: {train.get('level')} FAIL, {train.get('route')}: " + (
            f"{', '.join(failed)} failed" if failed else "no figures"
        )
    moved = fig.get("weights") or {}
    loss = fig.get("loss", fig.get("policy_loss"))
    parts = [
        f"{train.get('level')} {'ok' if train.get('ok') else 'FAIL'}",
        f"{train.get('route')}, {_figure(train.get('seconds'), '.0f')} s",
        f"loss {_figure(loss, '.4g')}",
        f"weights changed {moved.get('changed', '-')}/{moved.get('compared', '-')}",
        f"log-prob max diff {_figure(fig.get('logprob_diff_max'), '.2e')}",
    ]
    return f"  {node['label']}: " + ", ".join(parts)


def _train_lines(report: ClusterReport) -> list[str]:
    return ["training step:", *(_train_line(n) for n in report.nodes if n.get("train"))]


def table_text(report: ClusterReport) -> str:
    """The table, then every node's training step (with --train), every difference and failure
    in words, then the verdict."""
    trained = any(isinstance(n.get("train"), Mapping) for n in report.nodes)
    head = ["NODE", "CHECKS", *(["TRAIN"] if trained else [])]
    rows = [[*head, *(_CELLS[k][0] for k, _ in FIELDS)]]
    rows += [_row(node, report, trained=trained) for node in report.nodes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if trained:
        lines += _train_lines(report)
    if report.differences:
        lines.append("differences:")
        lines += [f"  {d.node}: {d.field}: {d.detail}" for d in report.differences]
    if report.failures:
        lines.append("failed checks:")
        lines += [f"  {node}: {failure}" for node, failure in report.failures]
    lines.append(_verdict(len(report.nodes), ok=report.ok))
    return "\n".join(lines)


def _verdict(count: int, *, ok: bool) -> str:
    if count == 1:  # one node has nothing to match: it passes its checks, or not
        return "the 1 node passes" if ok else "the 1 node does NOT pass"
    return f"all {count} nodes match and pass" if ok else f"the {count} nodes do NOT match"
