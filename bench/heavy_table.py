"""Render the heavy tier's results (`make test-heavy` writes them) as docs/heavy-tier.md's table.

Each cell stays short: what a row could not prove, or why it failed, becomes a numbered note under
the table (rows sharing a reason share its note), so the table stays readable at any width.

Usage: python bench/heavy_table.py [RESULTS_JSON]   (default: build/heavy/results.json)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

DEFAULT = Path(__file__).resolve().parents[1] / "build" / "heavy" / "results.json"
# A failure may quote the index this host was configured with; the docs name no index host.
INDEX_URL = re.compile(r"https?://[^\s()]*?/simple/?(?=[\s),;]|$)")


def _gb(value: int | None) -> str:
    return "—" if value is None else f"{value / 1e9:.1f} GB"


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def render(results: dict[str, Any]) -> str:
    """The Markdown table, with the run's date, host, what the columns mean, and the notes."""
    notes: list[str] = []
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
            f"{_result(row, notes)} | {_time(row['seconds'])} | {_gb(row['download_bytes'])} | "
            f"{_gb(row['env_bytes'])} |"
        )
    if notes:
        lines += ["", *(f"{n}. {note}" for n, note in enumerate(notes, start=1))]
    return "\n".join(lines)


def _result(row: dict[str, Any], notes: list[str]) -> str:
    """The row's verdict and the numbers of its notes (added to `notes` when new)."""
    reasons = [f"not provable here: {what}: {why}" for what, why in row["not_provable"].items()]
    reasons += [f"failed: {failure}" for failure in row["failures"]]
    numbers = [_note_number(_clean(reason), notes) for reason in reasons]
    label = "note" if len(numbers) == 1 else "notes"
    cell = _clean(row["result"]) + (f"; {label} {', '.join(numbers)}" if numbers else "")
    return cell.replace("|", "\\|")


def _note_number(text: str, notes: list[str]) -> str:
    if text not in notes:
        notes.append(text)
    return str(notes.index(text) + 1)


def _clean(text: str) -> str:
    """One line, with no configured index's address in it."""
    return INDEX_URL.sub("<configured index>", text).replace("\n", " ")


def main(argv: list[str]) -> int:
    """Print the table for the results file named in `argv` (or the default one)."""
    path = Path(argv[0]) if argv else DEFAULT
    print(render(json.loads(path.read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
