"""`verl-bootstrap kernels coverage`: which prebuilt source serves each kernel stage of each
shipped stack, from the recorded lists (offline), or asked of each source (--refresh)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from verl_bootstrap.cli.output import emit_json, out, path_arg
from verl_bootstrap.errors import EXIT_OK

if TYPE_CHECKING:
    from verl_bootstrap.kernels.coverage import CoverageRow
    from verl_bootstrap.kernels.record import KernelRecord

__all__ = ["cmd_coverage", "flags_coverage", "table"]


def flags_coverage(cover: argparse.ArgumentParser) -> None:
    """kernels coverage."""
    cover.add_argument("--profile", action="append", default=[], help="only this profile")
    cover.add_argument("--config", metavar="FILE_OR_URL", help="a site config (kernel_sources:)")
    cover.add_argument(
        "--record", type=path_arg, help="the recorded lists (default: the shipped profiles')"
    )
    cover.add_argument(
        "--refresh",
        action="store_true",
        help="ask each source (its index page, its published list, a HEAD of each release "
        "asset) and rewrite the recorded lists (needs the network)",
    )
    cover.add_argument("--json", action="store_true", help="print one JSON document")


def cmd_coverage(ns: argparse.Namespace) -> int:
    """`kernels coverage`."""
    from verl_bootstrap.kernels.coverage import coverage  # noqa: PLC0415 - kept off --help
    from verl_bootstrap.kernels.record import load_record, record_path  # noqa: PLC0415 - same
    from verl_bootstrap.profile.load import PROFILES_DIR  # noqa: PLC0415 - same

    path = ns.record or record_path(PROFILES_DIR / "fsdp.yaml")
    order = None
    if ns.config:
        from verl_bootstrap.siteconfig import load_site  # noqa: PLC0415 - kept off --help

        order = load_site(ns.config).config.kernel_sources
    if ns.refresh:
        from verl_bootstrap.kernels.refresh import refresh_record  # noqa: PLC0415 - network

        for note in refresh_record(path, load_record(path)):
            if not ns.json:
                out(note)
    record = load_record(path)
    rows = coverage(record, profiles=ns.profile or None, order=order)
    if ns.json:
        body = {"record": str(path), "sources": _sources(record)}
        emit_json({**body, "rows": [r.to_json() for r in rows]})
        return EXIT_OK
    for line in table(rows, record):
        out(line)
    return EXIT_OK


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
