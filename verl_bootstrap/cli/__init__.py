"""The command line: argparse, one small adapter per subcommand, and the one error boundary.

Only this package prints (through `output`) or exits. Each command family has its adapter module;
heavy imports happen inside the adapters, so that `--help` and `plan` start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence

from verl_bootstrap import __version__
from verl_bootstrap.cli.output import err, out
from verl_bootstrap.errors import EXIT_INTERRUPTED, EXIT_STEP_FAILED, BootstrapError

__all__ = ["main", "main_entry"]

Handler = Callable[[argparse.Namespace], int]
_COMMANDS = {"install", "plan", "verify", "profiles", "doctor", "lock", "export", "config",
             "onboard", "activate", "cluster", "wheelhouse", "envs", "info", "remove",
             "completion", "test", "bundle", "update"}  # fmt: skip


EXIT_BROKEN_PIPE = 141  # as a shell reports a command that SIGPIPE stopped


def main_entry() -> None:
    """Console-script entry point."""
    code = main(sys.argv[1:])
    try:
        sys.stdout.flush()  # a reader that went away (`| head`) shows here, after the last write
    except BrokenPipeError:
        code = _quiet_broken_pipe()
    sys.exit(code)


def main(argv: Sequence[str]) -> int:
    """Run the CLI with `argv`; return the exit code. Nothing a user can cause shows a traceback:
    an unexpected error is one line and a log file holding the trace (`--debug` prints it)."""
    args = [a for a in argv if a != "--debug"]
    debug = len(args) != len(argv) or bool(os.environ.get("VERL_BOOTSTRAP_DEBUG"))
    try:
        return _main(args)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except Exception as exc:  # the boundary: anything else is a bug, reported as one
        return _report_crash(exc, args, debug=debug)


def _main(args: list[str]) -> int:
    if not args or (args[0] not in _COMMANDS and args[0] not in ("-h", "--help", "--version")):
        args.insert(0, "install")  # `verl-bootstrap --profile fsdp` is the main job
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions: answer, then exit
        from verl_bootstrap.lifecycle.completion import complete

        complete(parser, frozenset(_COMMANDS))
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:  # argparse exits 2 on bad flags; keep that code
        return int(exc.code or 0)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return int(ns.handler(ns))
    except BootstrapError as exc:
        return _report_error(exc, json_mode=getattr(ns, "json", False))
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED


def _quiet_broken_pipe() -> int:
    """The reader of our output went away: stop without a word (and without a second error
    when the interpreter flushes stdout on exit)."""
    with contextlib.suppress(OSError, ValueError):  # stdout no file (a test's capture): nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def _report_crash(exc: Exception, args: list[str], *, debug: bool) -> int:
    from verl_bootstrap.cli.crash import describe_crash, write_crash_log

    command = next((a for a in args if a in _COMMANDS), "install")
    log = write_crash_log(exc, args)
    if debug:
        import traceback

        err("".join(traceback.format_exception(exc)).rstrip())
    err(f"error: {describe_crash(exc, command)}")
    where = f"the trace is in {log}" if log else "no log could be written"
    err(f"hint: {where}; please report it (run with --debug to see it here)")
    return EXIT_STEP_FAILED


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _report_error(exc: BootstrapError, *, json_mode: bool) -> int:
    from verl_bootstrap.redact import redact

    message, hint = redact(exc.message), redact(exc.hint) if exc.hint else None
    if json_mode:
        body = {
            "ok": False,
            "error": {"message": message, "hint": hint, "exit_code": exc.exit_code},
        }
        out(json.dumps(body, indent=2))
    err(f"error: {message}")
    if hint:
        err(f"hint: {hint}")
    return exc.exit_code


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and flag."""
    from verl_bootstrap.cli.parse import add_commands

    parser = argparse.ArgumentParser(
        prog="verl-bootstrap",
        description="Build a verified, reproducible verl environment with one command.",
        epilog="Exit codes: 0 ok, 1 a step failed, 2 bad input, 3 refused by a preflight check, "
        "130 interrupted. --debug (anywhere on the line) prints the trace of an unexpected error.",
    )
    parser.add_argument("--version", action="version", version=f"verl-bootstrap {__version__}")
    add_commands(parser)
    return parser
