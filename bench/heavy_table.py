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
    """The Markdown tables (the resolving rows, then the locked ones), each with the run's date,
    host and what the columns mean, and the notes of both under them."""
    notes: list[str] = []
    resolving = [r for r in results["rows"] if not r.get("lockfile")]
    locked = [r for r in results["rows"] if r.get("lockfile")]
    lines = _resolving(results, resolving, notes) if resolving else []
    if locked:
        lines += [*([""] if lines else []), *_locked(results, locked, notes)]
    if notes:
        lines += ["", *(f"{n}. {note}" for n, note in enumerate(notes, start=1))]
    return "\n".join(lines)


def _resolving(results: dict[str, Any], rows: list[dict[str, Any]], notes: list[str]) -> list[str]:
    lines = [
        f"Heavy tier, {results['date']} on {results['host']} "
        "(no GPU, no NVIDIA driver; `--backend venv --cuda VARIANT`; each install starts from an "
        "empty uv cache, so time and download include every download).",
        "",
        "| date | profile | variant | verl | python | result | time | download | env size |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.get('date', results['date'])} | "
            f"{row['profile']} | {row['variant']} | {row.get('ref', '')} | "
            f"{row['python'] or '—'} | "
            f"{_result(row, notes)} | {_time(row['seconds'])} | {_gb(row['download_bytes'])} | "
            f"{_gb(row['env_bytes'])} |"
        )
    return lines


def _locked(results: dict[str, Any], rows: list[dict[str, Any]], notes: list[str]) -> list[str]:
    lines = [
        f"Committed locks installed, {results['date']} on {results['host']} "
        "(no GPU, no NVIDIA driver; `--backend venv --cuda VARIANT --lockfile LOCK`, a user's pip "
        "settings; each install starts from an empty uv cache, so time and download include "
        "every download; time is the whole command, its verify included; checks are those of "
        "`verify --prefix` after it).",
        "",
        "| date | profile | lockfile | route | result | time | download | env size | checks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        route = f"note {_note_number(_clean(row['route']), notes)}" if row.get("route") else "—"
        lines.append(
            f"| {row.get('date', results['date'])} | {row['profile']} | `{row['lockfile']}` | "
            f"{route} | {_result(row, notes)} | {_time(row['seconds'])} | "
            f"{_gb(row['download_bytes'])} | {_gb(row['env_bytes'])} | "
            f"{_checks(row.get('checks', {}))} |"
        )
    return lines


def _checks(checks: dict[str, str]) -> str:
    """How verify's checks ended: passed (ok, or a warning that names its reason), skipped (verify
    says why), an import of a stage left out here, failed."""
    if not checks:
        return "—"
    kinds = ("ok", "warn", "skipped", "left out", "fail")
    count = {kind: sum(1 for v in checks.values() if v == kind) for kind in kinds}
    passed = f"{count['ok'] + count['warn']} passed"
    if count["warn"]:
        passed += f" ({count['warn']} with a warning)"
    parts = [passed, f"{count['skipped']} skipped"]
    if count["left out"]:
        parts.append(f"{count['left out']} of a stage left out")
    return ", ".join([*parts, f"{count['fail']} failed"])


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
