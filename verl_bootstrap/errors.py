"""The error hierarchy: every failure the user can act on, with its exit code and a hint."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_STEP_FAILED",
    "BootstrapError",
    "CannotWrite",
    "CommandFailed",
    "Declined",
    "InputError",
    "Interrupted",
    "PrefixBusy",
    "Refused",
    "StepFailed",
    "field_problems",
    "said_of",
]

EXIT_OK = 0
EXIT_STEP_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3
EXIT_INTERRUPTED = 130


class BootstrapError(Exception):
    """Root of every error the CLI turns into a message and an exit code."""

    exit_code = EXIT_STEP_FAILED

    def __init__(
        self, message: str, *, hint: str | None = None, data: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # the facts the message states (names, versions, paths), JSON-ready, for `--json` and
        # for callers that act on which refusal it was rather than on its wording
        self.data: dict[str, Any] = dict(data or {})


class InputError(BootstrapError):
    """A profile, flag, lockfile, config or source is invalid; nothing was changed."""

    exit_code = EXIT_BAD_INPUT


class Refused(BootstrapError):
    """A preflight check refused the run before anything was downloaded or installed."""

    exit_code = EXIT_REFUSED


class Declined(BootstrapError):
    """The user answered no at a prompt: nothing changed, and that is not an error."""

    exit_code = EXIT_OK


class PrefixBusy(Refused):
    """Another run holds the prefix lock."""


class StepFailed(BootstrapError):
    """A step of the plan failed; the state records it so a re-run resumes there."""

    exit_code = EXIT_STEP_FAILED


class CannotWrite(BootstrapError):
    """A file of the tool's could not be written (disk full, read-only, no permission); the file
    it would have replaced is intact, so a re-run resumes."""

    exit_code = EXIT_STEP_FAILED


class Interrupted(BootstrapError):
    """The user interrupted the run (Ctrl-C or SIGTERM)."""

    exit_code = EXIT_INTERRUPTED


class CommandFailed(BootstrapError):
    """A subprocess exited non-zero."""

    def __init__(
        self, message: str, *, returncode: int, tail: list[str], log_path: str | None
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.tail = tail
        self.log_path = log_path


def field_problems(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """A validator's errors (pydantic's `errors()`) as an InputError's data: each field, dotted
    ("stages.1.env"), and its problem, in the order the message names them."""
    return [{"field": ".".join(str(p) for p in e["loc"]), "problem": str(e["msg"])} for e in errors]


def said_of(problems: Iterable[Mapping[str, str]]) -> str:
    """The problems as a message names them: "field: problem; field: problem"."""
    return "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
