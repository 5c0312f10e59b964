"""Render the heavy tier's results (`make test-heavy` writes them) as the README's Markdown table.

Usage: python bench/heavy_table.py [RESULTS_JSON]   (default: build/heavy/results.json)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parents[1] / "build" / "heavy" / "results.json"
# A failure may quote the index this host was configured with; the README names no index host.
INDEX_URL = re.compile(r"https?://[^\s()]*?/simple/?(?=[\s),;]|$)")


def _gb(value: int | None) -> str:
    return "—" if value is None else f"{value / 1e9:.1f} GB"


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def render(results: dict[str, Any]) -> str:
    """The Markdown table, with the run's date, host and what the columns mean."""
    lines = [
        f"Heavy tier, {results['date']} on {results['host']} "
        "(no GPU, no NVIDIA driver; `--backend venv --cuda VARIANT`; each install starts from an "
        "empty uv cache, so time and download include every download).",
        "",
        "| date | profile | variant | verl | python | result | time | download | env size |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row.get('date', results['date'])} | "
            f"{row['profile']} | {row['variant']} | {row.get('ref', '')} | "
            f"{row['python'] or '—'} | "
            f"{_result(row)} | {_time(row['seconds'])} | {_gb(row['download_bytes'])} | "
            f"{_gb(row['env_bytes'])} |"
        )
    return "\n".join(lines)


def _result(row: dict[str, Any]) -> str:
    parts = [row["result"]]
    parts += [f"not provable here: {what}: {why}" for what, why in row["not_provable"].items()]
    parts += [f"failed: {failure}" for failure in row["failures"]]
    text = INDEX_URL.sub("<configured index>", "; ".join(parts))
    return text.replace("\n", " ").replace("|", "\\|")


def main(argv: list[str]) -> int:
    """Print the table for the results file named in `argv` (or the default one)."""
    path = Path(argv[0]) if argv else DEFAULT
    print(render(json.loads(path.read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
