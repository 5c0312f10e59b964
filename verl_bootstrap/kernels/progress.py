"""Live progress of a kernel's source build, read from its output as it streams: compiled units
so far (and of how many, where ninja says) and the time since the build began.

ninja prints `[N/M] <command>` per unit; setuptools without ninja prints one compiler command
per unit. Each counted unit becomes a ("progress", "build") event, which the console shows and
`--json` reports.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from verl_bootstrap.events import emit

__all__ = ["BuildProgress", "chain"]

_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]\s")
# a compiler invoked on one source file (`-c FILE`): gcc, g++, c++, cc, clang, nvcc, any prefix
_COMPILE = re.compile(r"(?:^|[\s/-])(?:[cg]\+\+|gcc|cc|clang\+\+|clang|nvcc)\s.*\s-c\s+\S")


class BuildProgress:
    """Counts compiled units in the lines of one stage's build and emits progress events."""

    def __init__(self, step: str, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.step, self.name, self.clock = step, name, clock
        self.started = clock()
        self.units = 0
        self.total: int | None = None

    def __call__(self, line: str) -> None:
        """One line of the build's output."""
        ninja = _NINJA.match(line)
        if ninja is not None:
            self.units, self.total = int(ninja[1]), int(ninja[2])
        elif _COMPILE.search(line):
            self.units += 1
        else:
            return
        seconds = self.clock() - self.started
        of = f"/{self.total}" if self.total else ""
        emit(
            f"{self.name}: {self.units}{of} compiled unit(s), {seconds:.0f}s",
            kind=("progress", "build"),
            step=self.step,
            units=self.units,
            total=self.total,
            seconds=round(seconds, 1),
        )


def chain(
    first: Callable[[str], None] | None, then: Callable[[str], None]
) -> Callable[[str], None]:
    """A line handler that calls `first` (when set), then `then`."""

    def both(line: str) -> None:
        if first is not None:
            first(line)
        then(line)

    return both
