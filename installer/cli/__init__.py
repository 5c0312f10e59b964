"""The command line: argparse, one small adapter per subcommand, and the one error boundary.

Only this package prints (through `output`) or exits. Each command family has its adapter module;
heavy imports happen inside the adapters, so that `--help` and `plan` start fast.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence

from installer import __version__
from installer.cli.output import err, out
from installer.errors import EXIT_INTERRUPTED, BootstrapError

__all__ = ["main", "main_entry"]

Handler = Callable[[argparse.Namespace], int]
_COMMANDS = {"install", "plan", "verify", "profiles", "doctor", "lock", "export", "config",
             "onboard", "activate", "cluster", "bundle"}  # fmt: skip


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main(sys.argv[1:]))


def main(argv: Sequence[str]) -> int:
    """Run the CLI with `argv`; return the exit code."""
    args = list(argv)
    if not args or (args[0] not in _COMMANDS and args[0] not in ("-h", "--help", "--version")):
        args.insert(0, "install")  # `verl-bootstrap --profile fsdp` is the main job
    parser = build_parser()
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


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _report_error(exc: BootstrapError, *, json_mode: bool) -> int:
    if json_mode:
        body = {
            "ok": False,
            "error": {"message": exc.message, "hint": exc.hint, "exit_code": exc.exit_code},
        }
        out(json.dumps(body, indent=2))
    err(f"error: {exc.message}")
    if exc.hint:
        err(f"hint: {exc.hint}")
    return exc.exit_code


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and flag."""
    from installer.cli.parse import add_commands

    parser = argparse.ArgumentParser(
        prog="verl-bootstrap",
        description="Build a verified, reproducible verl environment with one command.",
        epilog="Exit codes: 0 ok, 1 a step failed, 2 bad input, 3 refused by a preflight check, "
        "130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"verl-bootstrap {__version__}")
    add_commands(parser)
    return parser
