"""Probe run inside a target env's interpreter: load each compiled module named on the command
line and print one JSON object {module: null | "error text"}. Standalone, stdlib-only.
"""

from __future__ import annotations

import importlib
import json
import os
import sys


def main(modules: list[str]) -> None:
    """Import each module; record the error, never raise."""
    answer: dict[str, str | None] = {}
    for name in modules:
        try:
            importlib.import_module(name)
            answer[name] = None
        except BaseException as exc:
            answer[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(answer))


if __name__ == "__main__":
    main(sys.argv[1:])
    # no interpreter shutdown: after torch and a kernel are loaded it takes about half a second,
    # and nothing is left to clean up
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
