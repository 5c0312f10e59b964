"""Turning events and reports into terminal text. Used only by the CLI."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TextIO

from verl_bootstrap.cli.output import printable
from verl_bootstrap.events import Event

__all__ = ["Console"]

_SYMBOL = {"done": "✓", "skipped": "·", "failed": "✗", "aborted": "-", "interrupted": "!"}


class Console:
    """Shows steps as they run: a live tail on a terminal, plain lines otherwise; quiet for JSON."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.quiet = quiet
        self.lock = threading.Lock()
        self.started: dict[str, float] = {}
        self.status_shown = False
        self.notes: list[str] = []  # kept even when quiet: --json reports them
        self.progress: dict[str, dict[str, object]] = {}  # step -> its build's latest progress

    def __call__(self, event: Event) -> None:
        with self.lock:  # workers emit too: one event at a time, in the order they came
            if event.kind[:1] == ("note",):
                self.notes.append(event.message)
            if event.kind[:1] == ("progress",):
                self.progress[str(event.data.get("step", ""))] = _progress(event)
            if not self.quiet:
                self._show(event)

    def _show(self, event: Event) -> None:
        step = str(event.data.get("step", ""))
        kind = event.kind
        if kind == ("step", "start"):
            self.started[step] = time.monotonic()
            self._line(f"▸ {step}: {event.message}")
        elif kind == ("step", "line"):
            if self.tty:
                self._status(step, event.message)
        elif kind[:1] == ("step",):
            seconds = float(event.data.get("seconds") or 0.0)
            mark = _SYMBOL.get(kind[1], "?")
            extra = f" ({seconds:.1f}s)" if seconds else ""
            text = (
                f"{mark} {step}: {event.message}{extra}"
                if kind[1] != "done"
                else f"{mark} {step}{extra}"
            )
            self._line(text)
        elif kind[:1] == ("note",):
            self._line(f"note: {event.message}")
        elif kind[:1] == ("progress",) and self.tty:
            self._status(step, event.message)
        elif kind[:1] == ("progress",):
            self._line(f"  {event.message}")

    def _status(self, step: str, line: str) -> None:
        width = shutil.get_terminal_size((100, 20)).columns
        elapsed = time.monotonic() - self.started.get(step, time.monotonic())
        text = printable(f"  {step} {elapsed:5.0f}s │ {line}")[: width - 1]
        self.stream.write("\r\033[K" + text)
        self.stream.flush()
        self.status_shown = True

    def _line(self, text: str) -> None:
        if self.status_shown:
            self.stream.write("\r\033[K")
            self.status_shown = False
        self.stream.write(printable(text) + "\n")
        self.stream.flush()


def _progress(event: Event) -> dict[str, object]:
    keep = ("units", "total", "seconds")
    return {"message": event.message, **{k: event.data.get(k) for k in keep}}
