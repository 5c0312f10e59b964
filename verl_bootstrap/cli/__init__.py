"""The command line: argparse, one small adapter per subcommand, and the one error boundary.

Only this package prints (through `output`) or exits. The commands are declared once, in
cli.registry; each command has its module in cli/commands/ (its flags beside its handler), loaded
only when that command runs, and heavy imports happen inside the handlers, so that `--help` and
`plan` start fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence

from verl_bootstrap.cli.output import err, out, set_color
from verl_bootstrap.cli.registry import NAMES
from verl_bootstrap.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STEP_FAILED,
    BootstrapError,
)

__all__ = ["main", "main_entry"]

_TOP_FLAGS = ("-h", "--help", "--version")


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
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions: answer, then exit
        from verl_bootstrap.cli.shellcomplete import complete

        complete(build_parser(), NAMES)
    if not args or args[0] == "help":  # bare, or `help [COMMAND]`: the help, exit 0
        return _help(args[1:2])
    if args[0].startswith("-") and args[0] not in _TOP_FLAGS:
        args.insert(0, "install")  # `verl-bootstrap --profile fsdp` is the main job
    elif args[0] not in NAMES and args[0] not in _TOP_FLAGS:
        return _unknown_command(args[0])
    args, command_line = _split_command_line(args)
    parser = build_parser(args[0])
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:  # argparse exits 2 on bad flags; keep that code
        return int(exc.code or 0)
    ns.command_line = command_line
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    set_color(getattr(ns, "color", "auto"))
    try:
        return int(ns.handler(ns))
    except BootstrapError as exc:
        return _report_error(exc, json_mode=getattr(ns, "json", False))
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED


def _split_command_line(args: list[str]) -> tuple[list[str], list[str] | None]:
    """`run ... -- CMD ARGS`: the command after the first `--` is the user's, never our flags
    (argparse would take its first word for the ENV and its flags for ours)."""
    if args[0] != "run" or "--" not in args:
        return args, None
    cut = args.index("--")
    return args[:cut], args[cut + 1 :]


def _help(command: list[str]) -> int:
    """`verl-bootstrap`, `help`, `help COMMAND`: the help on stdout, exit 0."""
    if command and command[0] not in NAMES:
        return _unknown_command(command[0])
    if command:
        return _main([command[0], "--help"])
    out(build_parser("").format_help().rstrip())
    return EXIT_OK


def _unknown_command(word: str) -> int:
    from verl_bootstrap.cli.argparser import did_you_mean

    err(f"error: unknown command {word!r}")
    guess = did_you_mean(word, [*NAMES, "help"])
    where = "`verl-bootstrap help` lists the commands"
    err(f"hint: did you mean `verl-bootstrap {guess}`? ({where})" if guess else f"hint: {where}")
    return EXIT_BAD_INPUT


def _quiet_broken_pipe() -> int:
    """The reader of our output went away: stop without a word (and without a second error
    when the interpreter flushes stdout on exit)."""
    with contextlib.suppress(OSError, ValueError):  # stdout no file (a test's capture): nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def _report_crash(exc: Exception, args: list[str], *, debug: bool) -> int:
    from verl_bootstrap.cli.crash import describe_crash, write_crash_log

    command = next((a for a in args if a in NAMES), "install")
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
    from verl_bootstrap.redact import redact, redact_data

    message, hint = redact(exc.message), redact(exc.hint) if exc.hint else None
    if exc.exit_code == EXIT_OK:  # the user said no at a prompt: said plainly, not an error
        err(message)
        return EXIT_OK
    if json_mode:
        detail = {"message": message, "hint": hint, "exit_code": exc.exit_code}
        detail |= {"kind": type(exc).__name__, "data": redact_data(exc.data)}
        body = {"ok": False, "error": detail}
        out(json.dumps(body, indent=2, default=str))
    err(f"error: {message}")
    if hint:
        err(f"hint: {hint}")
    return exc.exit_code


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand; the flags of `command` only, or of every command when None."""
    from verl_bootstrap.cli.parse import build_parser as build

    return build(command)
