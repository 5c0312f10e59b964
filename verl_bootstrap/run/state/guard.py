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
from typing import Any

from verl_bootstrap.errors import InputError, PrefixBusy
from verl_bootstrap.safety import jsontext

__all__ = ["guarding"]

_POLL_SECONDS = 0.5


@contextmanager
def guarding(lock_path: Path, *, wait: float = 0.0) -> Iterator[None]:
    """Hold the lock for the block; wait up to `wait` seconds for another holder, then refuse."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_own(lock_path)
    try:
        _acquire(fd, lock_path, wait)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _open_own(lock_path: Path) -> int:
    """The lock file itself, never what a symlink in its place points at (we truncate it)."""
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if lock_path.is_symlink():
            raise InputError(
                f"{lock_path} is a symlink; verl-bootstrap will not write through it",
                hint=f"remove {lock_path} (it holds no state) and run again",
            ) from None
        raise InputError(
            f"cannot open the env's lock {lock_path}: {exc.strerror}",
            hint="check the permissions of the env's folder",
        ) from None


def _acquire(fd: int, lock_path: Path, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _holder_info(lock_path)
                raise PrefixBusy(
                    f"another verl-bootstrap run is installing into this env ({_holder(holder)})",
                    hint="wait for it to finish, or pass --wait SECONDS to queue behind it",
                    data={"holder": holder},
                ) from None
            time.sleep(_POLL_SECONDS)


def _holder_info(lock_path: Path) -> dict[str, Any] | None:
    """What the lock file says of its holder: pid, host, since (None: unreadable)."""
    try:
        info = jsontext.loads(lock_path.read_text()[:4096] or "{}")
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("since", 0), (int, float)):
        return None
    return {"pid": info.get("pid"), "host": info.get("host"), "since": info.get("since")}


def _holder(info: dict[str, Any] | None) -> str:
    if info is None:
        return "holder unknown"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since") or 0))
    return f"pid {info.get('pid')} on {info.get('host')}, since {since}"
