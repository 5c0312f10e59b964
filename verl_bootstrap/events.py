"""Events: the library reports progress through one emitter; the CLI decides what to show."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "emit", "listening"]

_log = logging.getLogger("verl_bootstrap")


@dataclass(frozen=True)
class Event:
    """One thing that happened: `kind` is a path such as ("step", "start")."""

    kind: tuple[str, ...]
    message: str
    data: dict[str, Any] = field(default_factory=dict)


Listener = Callable[[Event], None]


def _to_logging(event: Event) -> None:
    _log.debug("%s: %s", "/".join(event.kind), event.message)


_listener: ContextVar[Listener] = ContextVar("verl_bootstrap_listener", default=_to_logging)


def emit(message: str, *, kind: tuple[str, ...], **data: Any) -> None:
    """Send an event to whoever listens (the CLI's renderer, or logging by default)."""
    _listener.get()(Event(kind=kind, message=message, data=data))


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Route events to `listener` for the duration of the block."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
