"""Turning events into terminal text. Used only by the CLI.

On a terminal, a step that is running has one live line that a timer thread redraws on its own
(spinner, elapsed seconds, the child's latest line, the build's progress or a download's bytes),
so a quiet step such as verify still shows that it is alive; the finished step's line replaces
it. Without a terminal, plain lines only (no redraws); with --json, nothing (the notes are kept
for the report).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TextIO

from verl_bootstrap.cli.output import paint, printable
from verl_bootstrap.events import Event

__all__ = ["Console"]

_SYMBOL = {"done": "✓", "skipped": "·", "failed": "✗", "aborted": "-", "interrupted": "!"}
_STYLE = {"done": "ok", "skipped": "dim", "failed": "fail", "aborted": "dim", "interrupted": "warn"}
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK_SECONDS = 0.1


@dataclass
class _Running:
    """A step (or an activity) shown on the live line."""

    started: float
    latest: str = ""


class Console:
    """Shows steps as they run: a live, ticking line on a terminal, plain lines otherwise; quiet
    for JSON. Use it as a context manager: the ticker runs inside the block."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.quiet = quiet
        self.lock = threading.Lock()
        self.running: dict[str, _Running] = {}  # in start order: the live line shows the last
        self.status_shown = False
        self.notes: list[str] = []  # kept even when quiet: --json reports them
        self.progress: dict[str, dict[str, object]] = {}  # step -> its build's latest progress
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._frame = 0

    def __enter__(self) -> Console:
        if self.tty and not self.quiet:
            self._ticker = threading.Thread(target=self._tick, name="console-ticker", daemon=True)
            self._ticker.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self.lock:
            self._erase()

    def __call__(self, event: Event) -> None:
        with self.lock:  # workers emit too: one event at a time, in the order they came
            if event.kind[:1] == ("note",):
                if event.message in self.notes:
                    return  # said once (a shared index is read by several steps)
                self.notes.append(event.message)
            if event.kind[:1] == ("progress",):
                self.progress[str(event.data.get("step", ""))] = _progress(event)
            if not self.quiet:
                self._show(event)

    @contextmanager
    def activity(self, name: str, message: str = "") -> Iterator[None]:
        """A live line for work that is no step (a command's one long call): ticks while the
        block runs, then goes away."""
        with self.lock:
            self.running[name] = _Running(started=time.monotonic(), latest=message)
            self._redraw()
        try:
            yield
        finally:
            with self.lock:
                self.running.pop(name, None)
                self._erase()

    def _show(self, event: Event) -> None:
        step = str(event.data.get("step", ""))
        kind = event.kind
        if kind == ("step", "start"):
            self.running[step] = _Running(started=time.monotonic())
            self._line(f"{paint('▸', 'step', self.stream)} {step}: {event.message}")
        elif kind == ("step", "line") or (kind[:1] == ("progress",) and self.tty):
            if step in self.running:
                self.running[step].latest = event.message
            self._redraw()
        elif kind[:1] == ("live",):  # the live line alone (a download's bytes), never a line
            if self.running:
                live = self.running[step] if step in self.running else [*self.running.values()][-1]
                live.latest = event.message
            self._redraw()
        elif kind[:1] == ("step",):
            self.running.pop(step, None)
            self._line(self._finished(step, kind[1], event))
        elif kind[:1] == ("note",):
            self._line(f"{paint('note:', 'warn', self.stream)} {event.message}")
        elif kind[:1] == ("progress",):
            self._line(f"  {event.message}")

    def _finished(self, step: str, status: str, event: Event) -> str:
        seconds = float(event.data.get("seconds") or 0.0)
        mark = paint(_SYMBOL.get(status, "?"), _STYLE.get(status, ""), self.stream)
        extra = paint(f" ({seconds:.1f}s)", "dim", self.stream) if seconds else ""
        if status == "done":
            return f"{mark} {step}{extra}"
        return f"{mark} {step}: {event.message}{extra}"

    def _tick(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            with self.lock:
                self._frame += 1
                self._redraw()

    def _redraw(self) -> None:
        """The live line of the step started last, on a terminal only."""
        if not (self.tty and self.running) or self.quiet:
            return
        name, live = next(reversed(self.running.items()))
        width = shutil.get_terminal_size((100, 20)).columns
        elapsed = time.monotonic() - live.started
        spin = _SPINNER[self._frame % len(_SPINNER)]
        text = printable(f"{spin} {name} {elapsed:4.0f}s │ {live.latest}")[: width - 1]
        self.stream.write("\r\033[K" + printable(paint(text, "dim", self.stream)))
        self.stream.flush()
        self.status_shown = True

    def _erase(self) -> None:
        if self.status_shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.status_shown = False

    def _line(self, text: str) -> None:
        self._erase()
        self.stream.write(printable(text) + "\n")
        self.stream.flush()
        self._redraw()


def _progress(event: Event) -> dict[str, object]:
    keep = ("units", "total", "seconds")
    return {"message": event.message, **{k: event.data.get(k) for k in keep}}
