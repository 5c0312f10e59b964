"""`verl-bootstrap kernels coverage`: which prebuilt source serves each kernel stage of each
shipped stack, from the recorded lists (offline), or asked of each source (--refresh)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import config_flag, dry_run_flag, json_flag, profile_flag
from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, InputError

if TYPE_CHECKING:
    from verl_bootstrap.kernels.coverage import CoverageRow
    from verl_bootstrap.kernels.record import KernelRecord

__all__ = ["aligned", "cmd_coverage", "flags_coverage", "table"]


def flags_coverage(cover: argparse.ArgumentParser) -> None:
    """kernels coverage."""
    profile_flag(cover, "only this profile", repeat=True)
    config_flag(cover, "a site config (kernel_sources:)")
    cover.add_argument(
        "--record", type=path_arg, help="the recorded lists (default: the shipped profiles')"
    )
    cover.add_argument(
        "--refresh",
        action="store_true",
        help="ask each source (its index page, its published list, a HEAD of each release "
        "asset) and rewrite the recorded lists (needs the network); a source that does not "
        "answer keeps its list, and the command exits 1",
    )
    dry_run_flag(
        cover, "with --refresh: ask the sources and show the table they give; write nothing"
    )
    cover.add_argument(
        "--format",
        choices=("table", "markdown"),
        default="table",
        help="table: columns aligned for a terminal (default); markdown: a Markdown table",
    )
    json_flag(cover)


def cmd_coverage(ns: argparse.Namespace) -> int:
    """`kernels coverage`: the table from the recorded lists (after --refresh, the fresh ones);
    exit 1 when a source could not be asked (its recorded list kept)."""
    from verl_bootstrap.kernels.kernelcmd import coverage_report

    if ns.dry_run and not ns.refresh:
        raise InputError(
            "--dry-run goes with --refresh", hint="kernels coverage --refresh --dry-run"
        )
    report = coverage_report(
        ns.record, profiles=ns.profile, config=ns.config, refresh=ns.refresh, dry_run=ns.dry_run
    )
    path, record, failed, rows = report.path, report.record, report.failed, report.rows
    if ns.refresh and not ns.json:
        for note in report.notes:
            err(note)
        err(_refresh_verdict(path, failed, dry_run=ns.dry_run))
    if ns.json:
        body = {"record": str(path), "sources": _sources(record), "not_refreshed": list(failed)}
        emit_json({**body, "dry_run": ns.dry_run, "rows": [r.to_json() for r in rows]})
    else:
        for line in table(rows, record) if ns.format == "markdown" else aligned(rows, record):
            out(line)
    return EXIT_STEP_FAILED if failed else EXIT_OK


def _refresh_verdict(path: Path, failed: tuple[str, ...], *, dry_run: bool) -> str:
    kept = f"could not refresh {', '.join(failed)} (its recorded list is kept); " if failed else ""
    if dry_run:
        return f"{kept}dry run: {path} is not rewritten"
    return f"{kept}rewrote {path}"


def _sources(record: KernelRecord) -> dict[str, dict[str, str]]:
    return {
        name: {"recorded": seen.recorded.isoformat(), "from": seen.origin}
        for name, seen in record.sources.items()
    }


def table(rows: list[CoverageRow], record: KernelRecord) -> list[str]:
    """The rows as a Markdown table, and where each recorded list came from."""
    head = "| profile | CUDA | platform | Python | stage | torch | source (trust) | wheel, or why |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        served = f"{r.source} ({r.trust})" if r.trust else f"**{r.source}**"
        detail = f"`{r.wheel.rsplit('/', 1)[-1]}`" if r.wheel else r.why
        lines.append(
            f"| {r.profile} | {r.variant} | {r.platform} | {r.key.python} | {r.stage} | "
            f"{r.key.torch} | {served} | {detail} |"
        )
    lines.append("")
    for name, seen in record.sources.items():
        lines.append(f"- {name}: recorded {seen.recorded.isoformat()} from {seen.origin}")
    return lines


_HEAD = (
    "PROFILE",
    "CUDA",
    "PLATFORM",
    "PYTHON",
    "STAGE",
    "TORCH",
    "SOURCE (TRUST)",
    "WHEEL, OR WHY",
)


def aligned(rows: list[CoverageRow], record: KernelRecord) -> list[str]:
    """The rows in columns aligned for a terminal (the last, long one left free), then where
    each recorded list came from."""
    cells: list[tuple[str, ...]] = [_HEAD]
    for r in rows:
        served = f"{r.source} ({r.trust})" if r.trust else r.source
        detail = r.wheel.rsplit("/", 1)[-1] if r.wheel else r.why
        key = (str(r.key.python), r.stage, str(r.key.torch))
        cells.append((r.profile, r.variant, r.platform, *key, served, detail))
    widths = [max(len(row[i]) for row in cells) for i in range(len(_HEAD) - 1)]
    lines = [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]])
        for row in cells
    ]
    lines.append("")
    for name, seen in record.sources.items():
        lines.append(f"{name}: recorded {seen.recorded.isoformat()} from {seen.origin}")
    return lines
