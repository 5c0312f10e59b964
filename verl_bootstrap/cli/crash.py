"""What the CLI does with an exception nobody expected: one line for the user, the trace in a log.

A traceback is for the tool's developers; the user gets what failed and where the trace is kept
(`$VERL_BOOTSTRAP_HOME/logs`, else the system's temp folder), with every credential redacted.
`--debug` prints the trace as well.
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback
from pathlib import Path

from verl_bootstrap.redact import redact

__all__ = ["crash_log_dir", "describe_crash", "write_crash_log"]


def crash_log_dir() -> Path:
    """Where traces of unexpected errors go: the tool's own folder."""
    home = os.environ.get("VERL_BOOTSTRAP_HOME") or str(Path.home() / ".verl-bootstrap")
    return Path(home) / "logs"


def write_crash_log(exc: BaseException, argv: list[str]) -> Path | None:
    """Write the redacted trace of `exc`; its path, or None when no folder takes it."""
    body = f"$ verl-bootstrap {redact(' '.join(argv))}\n" + redact(
        "".join(traceback.format_exception(exc))
    )
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    for folder in (crash_log_dir(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
            return path
        except OSError:
            continue
    return None


def describe_crash(exc: BaseException, command: str) -> str:
    """One line: which command failed, with what (redacted)."""
    what = redact(str(exc).splitlines()[0] if str(exc) else "")[:300]
    kind = type(exc).__name__
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"`{command}` failed: {exc.strerror or kind}: {redact(str(exc.filename))}"
    return f"`{command}` failed unexpectedly: {kind}{': ' + what if what else ''}"
