"""`lock`: resolve profiles into lockfiles (each with what changed), or with --check say which
committed lockfiles are stale; the decisions are verl_bootstrap.lock.making.lockcommand's."""

from __future__ import annotations

import argparse
import datetime
import functools
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.flags import (
    cuda_flag,
    dry_run_flag,
    lock_source_flags,
    platform_flag,
    profile_flag,
    renamed,
)
from verl_bootstrap.cli.optionsbuilder import scratch_options
from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, BootstrapError, InputError

if TYPE_CHECKING:
    from verl_bootstrap.lock.making.lockcommand import CheckedLock, Locked, LockJob

__all__ = ["cmd_lock", "flags_lock", "shown_path"]


def flags_lock(lock: argparse.ArgumentParser) -> None:
    """lock's flags."""
    profile_flag(lock, "a shipped profile name or a YAML file")
    cuda_flag(lock, "one CUDA variant (default: every variant of the profile)")
    platform_flag(lock)
    lock.add_argument("--all", action="store_true", help="every shipped profile and variant")
    lock.add_argument(
        "--check", action="store_true", help="exit non-zero when a committed lockfile is stale"
    )
    lock.add_argument(
        "--links",
        action="store_true",
        help="with --check: every native library of each lock's wheels links against the others "
        "(downloads each native wheel once; what was read is cached)",
    )
    lock.add_argument(
        "--python-version",
        metavar="X.Y",
        type=_python_version,
        help="the Python to lock for (default: the old lock's)",
    )
    renamed(lock, "--python", "--python-version", "--python is an interpreter's path on install")
    lock.add_argument(
        "--exclude-newer",
        metavar="DATE",
        type=_cutoff,
        help="ignore files uploaded after DATE (default: kept)",
    )
    lock.add_argument(
        "--upgrade",
        action="store_true",
        help="resolve afresh: today's cutoff unless --exclude-newer names one, no version kept",
    )
    lock.add_argument(
        "--glibc",
        type=_glibc,
        help="the oldest glibc of the machines (default 2.28; SGLang needs 2.34)",
    )
    lock.add_argument("-o", "--output", type=path_arg, help="where to write (one lockfile only)")
    lock.add_argument(
        "--dir",
        type=path_arg,
        help="the lockfiles folder to write (default: lockfiles/ in the current folder)",
    )
    dry_run_flag(lock, "name each lockfile it would write or regenerate; change nothing")
    lock_source_flags(lock)


def _python_version(value: str) -> str:
    """An argparse type: a Python version as a lock names it (3.12), checked before anything
    runs (argparse then exits 2 naming the flag, under --dry-run too)."""
    if not re.fullmatch(r"3\.[0-9]{1,2}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a Python version (write it like 3.12)")
    return value


def _glibc(value: str) -> str:
    """An argparse type: a glibc version, 2.N."""
    if not re.fullmatch(r"2\.[0-9]{1,3}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a glibc version (write it like 2.34)")
    return value


def _cutoff(value: str) -> str:
    """An argparse type: a date or an ISO time (the lock records it as UTC)."""
    try:
        datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        msg = f"{value!r} is not a date or time (write it like 2026-12-01 or 2026-12-01T12:00:00Z)"
        raise argparse.ArgumentTypeError(msg) from None
    return value


def cmd_lock(ns: argparse.Namespace) -> int:
    """`lock`: write lockfiles, or with --check say which committed ones are stale."""
    from verl_bootstrap.lock.making.lockcommand import lock_targets

    if ns.check:
        return _check(ns)
    if ns.links:
        raise InputError("--links is a part of --check: pass `lock --check --links`")
    targets = lock_targets(ns.profile, ns.cuda, every=ns.all)
    for skipped in targets.skipped:
        err(f"· {skipped}")
    if ns.output is not None and len(targets.pairs) != 1:
        raise InputError("--output needs exactly one lockfile: pass --profile and --cuda")
    if ns.dry_run:
        return _lock_dry_run(ns, targets.pairs)
    said: set[str] = set()  # a note (an unreachable index) is said once per run, not per lockfile
    single = len(targets.pairs) == 1
    results = [_lock_one(ns, p, v, single=single, said=said) for p, v in targets.pairs]
    failed = any("error" in r for r in results)
    if ns.json:
        emit_json({"schema": "verl-bootstrap.lock/1", "ok": not failed, "lockfiles": results})
    return EXIT_STEP_FAILED if failed else EXIT_OK


def _job(ns: argparse.Namespace) -> LockJob:
    from verl_bootstrap.lock.making.lockcommand import LockJob

    return LockJob(
        platform=ns.platform,
        python=ns.python_version,
        exclude_newer=ns.exclude_newer,
        upgrade=ns.upgrade,
        glibc=ns.glibc,
        output=ns.output,
        folder=ns.dir,
    )


def shown_path(path: Path) -> str:
    """A path as the user reads it: relative to the current folder when under it, else whole."""
    whole = path.absolute()
    try:
        return str(whole.relative_to(Path.cwd()))
    except ValueError:
        return str(whole)


def _lock_dry_run(ns: argparse.Namespace, targets: list[tuple[str, str]]) -> int:
    """`lock --dry-run`: each lockfile it would write (new) or regenerate (there); nothing runs."""
    from verl_bootstrap.lock.making.lockcommand import lock_path

    single = len(targets) == 1
    rows = []
    for profile, variant in targets:
        path = lock_path(_job(ns), profile, variant, single=single)
        state = "would regenerate" if path.is_file() else "would write"
        row = {"profile": profile, "variant": variant, "path": str(path.absolute())}
        rows.append({**row, "state": state})
    if ns.json:
        emit_json(
            {"schema": "verl-bootstrap.lock/1", "ok": True, "dry_run": True, "lockfiles": rows}
        )
    for row in [] if ns.json else rows:
        where = shown_path(Path(row["path"]))
        out(f"{row['state']} {where} ({row['profile']} {row['variant']} {ns.platform})")
    return EXIT_OK


def _lock_one(
    ns: argparse.Namespace, profile: str, variant: str, *, single: bool, said: set[str]
) -> dict[str, Any]:
    """Lock one profile variant, with a live line while it resolves; a failure is reported and
    the others still run."""
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.events import listening
    from verl_bootstrap.lock.making.kernelwheels import record_kernel_wheels
    from verl_bootstrap.lock.making.lockcommand import lock_request, lock_variant

    options = scratch_options(ns, profile, variant)
    request = lock_request(_job(ns), options, profile, variant, single=single)
    started = time.monotonic()
    try:
        with (
            Console(quiet=ns.json) as console,
            listening(console),
            console.activity("lock", f"resolving {profile} {variant} ({ns.platform})"),
        ):
            locked = lock_variant(request, after=record_kernel_wheels(options))
    except BootstrapError as exc:
        err(f"✗ {profile} {variant}: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else ""))
        return {"profile": profile, "variant": variant, "error": exc.message}
    for note in locked.result.notes:
        if note not in said:
            said.add(note)
            err(f"note: {note}")
    return _said_lock(ns, profile, variant, locked, seconds=time.monotonic() - started)


def _said_lock(
    ns: argparse.Namespace, profile: str, variant: str, locked: Locked, *, seconds: float
) -> dict[str, Any]:
    """What one lock resolved, what changed against the lockfile it replaced, where it went."""
    changes = locked.changes
    if not ns.json:
        err(f"resolved {locked.packages} packages in {seconds:.1f}s")
        if changes is None:
            err("  a new lockfile (no previous one to compare with)")
        for change in changes or ():
            err(f"  {change.line()}")
        if changes == ():
            err("  no version changed against the previous lockfile")
        out(f"{locked.state} {shown_path(locked.result.path)}")
    return {
        "profile": profile,
        "variant": variant,
        "path": str(locked.result.path.absolute()),
        "state": locked.state,
        "packages": locked.packages,
        "changes": None
        if changes is None
        else [{"name": c.name, "old": c.old, "new": c.new} for c in changes],
    }


def _check(ns: argparse.Namespace) -> int:
    """`lock --check`: each committed lockfile current or stale (and why); non-zero on any."""
    from verl_bootstrap.lock.making.lockcommand import check_lockfiles

    options_for = functools.partial(scratch_options, ns)  # (profile, variant): a scratch run's
    checked = check_lockfiles(ns.dir, ns.profile, options_for, offline=ns.offline, links=ns.links)
    stale = [c for c in checked if c.stale]
    if ns.json:
        body = [
            {
                "path": str(c.verdict.path),
                "stale": c.stale,
                "regenerate": c.verdict.regenerate,
                "verl_extras": c.gaps,
                "native_links": c.links if ns.links else None,
            }
            for c in checked
        ]
        emit_json({"schema": "verl-bootstrap.lock-check/1", "ok": not stale, "lockfiles": body})
    else:
        _show_check(checked, stale)
    return EXIT_STEP_FAILED if stale else EXIT_OK


def _show_check(checked: list[CheckedLock], stale: list[CheckedLock]) -> None:
    for c in checked:
        bad = c.stale
        out(f"{'✗ stale' if bad else '✓ current'} {c.verdict.path}" + (f": {bad}" if bad else ""))
        for line in [*c.gaps, *c.links]:
            out(f"    {line}")
        if bad and c.verdict.regenerate:
            out(f"    regenerate: {c.verdict.regenerate}")
    out(
        f"{len(stale)} of {len(checked)} lockfile(s) stale"
        if stale
        else f"{len(checked)} lockfile(s) current"
    )
