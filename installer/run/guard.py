"""The prefix guard: an exclusive flock on a file in the env, so two runs never install into one
env at once."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from installer.errors import PrefixBusy

__all__ = ["guarding"]

_POLL_SECONDS = 0.5


@contextmanager
def guarding(lock_path: Path, *, wait: float = 0.0) -> Iterator[None]:
    """Hold the lock for the block; wait up to `wait` seconds for another holder, then refuse."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, lock_path, wait)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _acquire(fd: int, lock_path: Path, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise PrefixBusy(
                    "another verl-bootstrap run is installing into this env "
                    f"({_holder(lock_path)})",
                    hint="wait for it to finish, or pass --wait SECONDS to queue behind it",
                ) from None
            time.sleep(_POLL_SECONDS)


def _holder(lock_path: Path) -> str:
    try:
        info = json.loads(lock_path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return "holder unknown"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    return f"pid {info.get('pid')} on {info.get('host')}, since {since}"
