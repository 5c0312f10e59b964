"""Reading what `srun --label` printed: each task's lines, and its framed answer, checked.

Real srun cuts a task's lines at 1 KiB (each piece labelled again), interleaves the tasks, mixes
in their stderr and adds notes of its own (`srun: error: n2: task 1: Killed`). The node report
therefore frames its answer (probes/node_report.py `frame`): a header with the byte length, the
sha256 and the count of parts, numbered base64 parts, an end line. An answer that cannot be read
back whole becomes a per-node error saying what went wrong, never an exception.

What a node prints is its own, and hostile to the rest: srun labels each of a task's lines, so
lines are split where srun splits them (a line feed, nothing else: a carriage return or a form
feed inside a node's line would otherwise start an unlabelled line that reads as srun's own
note), and srun's task lists are bounded by the job's tasks (`tasks 0-400000000` is one range,
never a list of 400 million numbers).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verl_bootstrap.redact import redact

__all__ = [
    "FRAME",
    "NODE_LINE",
    "TaskOutput",
    "lines_of",
    "read_answer",
    "split_output",
    "step_notes",
]

FRAME = "@@VB-ANSWER@@"
NODE_LINE = f"{FRAME} node "  # each task's first line: the node Slurm runs it on
_LABEL = re.compile(r"^\s*(?P<task>\d+): ?(?P<line>.*)$")
_NOTE = re.compile(r"^srun: error: (?P<node>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)$")
_HEAD = re.compile(rf"^{FRAME} begin (?P<size>\d+) (?P<sha>[0-9a-f]{{64}}) (?P<parts>\d+)$")
_PART = re.compile(rf"^{FRAME} (?P<index>\d+) (?P<text>[A-Za-z0-9+/=]*)$")


@dataclass(frozen=True)
class TaskOutput:
    """One task's labelled lines, the node it ran on, and what srun said about it."""

    task: int
    lines: tuple[str, ...] = ()
    node: str | None = None
    notes: tuple[str, ...] = ()


def lines_of(output: str) -> list[str]:
    """srun's lines: split at a line feed only (see the module's docstring)."""
    text = output.removesuffix("\n")
    return text.split("\n") if text else []


def split_output(output: str, tasks: int | None = None) -> dict[int, TaskOutput]:
    """Each task's lines (by srun's label) and srun's own notes about it, by task number.
    `tasks`: how many the job runs (None: as many as labelled a line); a note about any other
    task number is not the job's, and is dropped."""
    lines: dict[int, list[str]] = {}
    notes: list[re.Match[str]] = []
    for line in lines_of(output):
        labelled, note = _LABEL.match(line), _NOTE.match(line.strip())
        if labelled:
            lines.setdefault(int(labelled["task"]), []).append(labelled["line"])
        elif note:
            notes.append(note)
    count = tasks if tasks is not None else max(lines, default=-1) + 1
    said: dict[int, list[tuple[str, str]]] = {}
    for note in notes:
        for task in _tasks(note["tasks"], count):
            said.setdefault(task, []).append((note["node"], note["what"]))
    return {task: _task(task, lines.get(task, []), said.get(task, [])) for task in {*lines, *said}}


def step_notes(output: str) -> list[str]:
    """srun's notes about the whole step (`Force Terminated StepId=7.0`: it stopped every task
    when one was killed by a signal), without the `srun: ` and `error: ` in front."""
    found = []
    for line in lines_of(output):
        text = line.strip()
        if text.startswith("srun: ") and not _NOTE.match(text):
            found.append(text.removeprefix("srun: ").removeprefix("error: "))
    return found


def _tasks(text: str, count: int) -> list[int]:
    """srun's task list `1`, `0,2` or `0-3`, the numbers below `count` only (each range cut to
    them before it is counted out)."""
    found: set[int] = set()
    for piece in text.split(","):
        first, _, last = piece.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            found.update(range(int(first), min(int(last or first), count - 1) + 1))
    return sorted(found)


def _task(task: int, lines: list[str], notes: list[tuple[str, str]]) -> TaskOutput:
    named = [ln[len(NODE_LINE) :].strip() for ln in lines if ln.startswith(NODE_LINE)]
    node = named[0] if named else (notes[0][0] if notes else None)
    return TaskOutput(task, tuple(lines), node or None, tuple(what for _, what in notes))


class _Unreadable(Exception):
    """Why a task's answer cannot be read back (it becomes that node's error)."""


def read_answer(lines: Sequence[str]) -> dict[str, Any] | str:
    """The task's framed answer, or why it cannot be read (cut short, garbled, absent)."""
    try:
        return _read(lines)
    except _Unreadable as why:
        return str(why)


def _read(lines: Sequence[str]) -> dict[str, Any]:
    starts = [i for i, line in enumerate(lines) if line.startswith(f"{FRAME} begin")]
    if not starts:
        raise _Unreadable("it gave no answer")
    head = _HEAD.match(lines[starts[-1]].strip())
    if not head:
        raise _Unreadable("its answer's header is garbled")
    body = [line.strip() for line in lines[starts[-1] + 1 :]]
    if f"{FRAME} end" not in body:
        raise _Unreadable("its answer was cut short (no end line)")
    text = _parts(body[: body.index(f"{FRAME} end")], int(head["parts"]))
    return _decode(text, int(head["size"]), head["sha"])


def _parts(body: Sequence[str], count: int) -> str:
    """The base64 text of parts 0..count-1, in order; other lines (stderr) are skipped."""
    parts: dict[int, str] = {}
    for line in body:
        found = _PART.match(line)
        if found:
            parts[int(found["index"])] = found["text"]
        elif line.startswith(FRAME):
            raise _Unreadable("its answer holds a garbled part")
    if sorted(parts) != list(range(count)):
        raise _Unreadable(f"its answer is incomplete ({len(parts)} of {count} parts)")
    return "".join(parts[i] for i in range(count))


def _decode(text: str, size: int, sha: str) -> dict[str, Any]:
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise _Unreadable("its answer is garbled (not base64)") from None
    if len(data) != size:
        raise _Unreadable(f"its answer was cut ({len(data)} of {size} bytes)")
    if hashlib.sha256(data).hexdigest() != sha:
        raise _Unreadable("its answer is garbled (the sha256 does not match)")
    try:  # masked as every line of a log is: the answer may quote a URL with a login
        answer = json.loads(redact(data.decode("utf-8", "replace")))
    except ValueError:
        raise _Unreadable("its answer is garbled (not JSON)") from None
    if not isinstance(answer, dict):
        raise _Unreadable("its answer is not a JSON object")
    return answer
