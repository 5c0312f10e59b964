"""Subcommands of the lab wheelhouse: `wheelhouse list | add WHEEL --key ... | check`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, InputError

if TYPE_CHECKING:
    from verl_bootstrap.kernels.key import BuildKey
    from verl_bootstrap.kernels.remotehouse import AnyWheelhouse

__all__ = ["cmd_add", "cmd_check", "cmd_list", "flags_add", "flags_check", "flags_list"]

_KEY_HELP = (
    "the build key the wheel was made for: torch=2.11.0,cuda=13.0,cxx11abi=TRUE,python=cp312,"
    "platform=linux_x86_64 (cuda=cpu for a CPU torch)"
)


def flags_list(p: argparse.ArgumentParser) -> None:
    """wheelhouse list."""
    _house_flags(p)


def flags_add(add: argparse.ArgumentParser) -> None:
    """wheelhouse add WHEEL."""
    add.add_argument("wheel", type=path_arg, help="the .whl file to publish")
    given = add.add_mutually_exclusive_group(required=True)
    given.add_argument("--key", help=_KEY_HELP)
    given.add_argument("--key-of", type=path_arg, metavar="PREFIX", help="the key of this env")
    add.add_argument(
        "--dry-run", action="store_true", help="check the wheel and its key; publish nothing"
    )
    _house_flags(add)


def flags_check(p: argparse.ArgumentParser) -> None:
    """wheelhouse check."""
    _house_flags(p)


def _house_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(  # a string: a URL is not a path (Path would fold `//` and keep it)
        "--wheelhouse", metavar="FOLDER_OR_URL", help="default: the site config's"
    )
    parser.add_argument("--config", metavar="FILE_OR_URL", help="a site config file or URL")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _house(ns: argparse.Namespace) -> AnyWheelhouse:
    from verl_bootstrap.kernels.host import open_wheelhouse  # noqa: PLC0415 - kept off --help

    configured = ns.wheelhouse or None
    if configured is None:
        from verl_bootstrap.siteconfig import load_site  # noqa: PLC0415 - kept off --help

        configured = load_site(ns.config).config.wheelhouse
    return open_wheelhouse(configured, os.environ)


def cmd_list(ns: argparse.Namespace) -> int:
    """`wheelhouse list`."""
    from verl_bootstrap.events import listening  # noqa: PLC0415 - kept off --help

    house = _house(ns)
    skipped: list[str] = []
    with listening(lambda event: skipped.append(event.message)):
        entries = house.entries()
    writable = house.writable()
    if ns.json:
        emit_json(
            {
                "wheelhouse": house.shown(),
                "writable": writable,
                "wheels": [e.to_json() for e in entries],
                "notes": skipped,
            }
        )
        return EXIT_OK
    for note in skipped:
        err(f"note: {note}")
    mode = "" if writable else " (read-only for you: used, never written)"
    out(f"wheelhouse {house.shown()}: {len(entries)} wheel(s){mode}")
    for e in entries:
        out(f"  {e.file}\n    {e.key.describe()}  sha256 {e.sha256}")
    return EXIT_OK


def cmd_add(ns: argparse.Namespace) -> int:
    """`wheelhouse add WHEEL --key ...`: the key must be complete; it is never guessed."""
    house = _house(ns)
    if not Path(ns.wheel).is_file():
        raise InputError(f"{ns.wheel}: no such wheel file")
    key = _key(ns)
    if ns.dry_run:
        if ns.json:
            emit_json(
                {
                    "wheelhouse": house.shown(),
                    "dry_run": True,
                    "key": key.describe(),
                    "wheel": str(ns.wheel),
                }
            )
        else:
            out(f"would add {Path(ns.wheel).name} to {house.shown()} ({key.describe()})")
        return EXIT_OK
    entry = house.publish(Path(ns.wheel), key)
    if ns.json:
        emit_json({"wheelhouse": house.shown(), "added": entry.to_json()})
    else:
        out(f"added {entry.file} to {house.shown()} ({key.describe()}, sha256 {entry.sha256})")
    return EXIT_OK


def _key(ns: argparse.Namespace) -> BuildKey:
    from verl_bootstrap.kernels.key import FIELDS, BuildKey  # noqa: PLC0415 - kept off --help
    from verl_bootstrap.kernels.wheelhouse import check_key  # noqa: PLC0415 - kept off --help

    if ns.key_of is not None:
        from verl_bootstrap.envs.base import env_python  # noqa: PLC0415 - kept off --help
        from verl_bootstrap.kernels.probe import probe_key  # noqa: PLC0415 - kept off --help

        python = env_python(Path(ns.key_of))
        if not python.is_file():
            raise InputError(
                f"--key-of {ns.key_of}: no env there ({python} does not exist)",
                hint="pass the --prefix of an env verl-bootstrap built, or state --key",
            )
        key = probe_key(python)
    else:
        pairs = [p.split("=", 1) for p in ns.key.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise InputError(f"--key {ns.key!r}: write it as FIELD=VALUE,... ({', '.join(FIELDS)})")
        unknown = sorted({k.strip() for k, _ in pairs} - set(FIELDS))
        if unknown:
            raise InputError(
                f"--key: unknown field(s) {', '.join(unknown)} (known: {', '.join(FIELDS)})"
            )
        given = {k.strip(): v.strip() for k, v in pairs}
        check_key(given, "--key")  # before anything is written where a lab reads it
        key = BuildKey.from_mapping(given)
    if not key.complete:
        raise InputError(
            f"the key {key.describe()} is incomplete: a wheel is only used for an env it matches "
            "in every field",
            hint=_KEY_HELP,
        )
    return key


def cmd_check(ns: argparse.Namespace) -> int:
    """`wheelhouse check`: non-zero when any wheel is missing or changed."""
    house = _house(ns)
    problems = house.check()
    if ns.json:
        emit_json({"wheelhouse": house.shown(), "ok": not problems, "problems": problems})
    else:
        count = len(house.entries())
        out(f"wheelhouse {house.shown()}: {count} wheel(s), {len(problems)} problem(s)")
        for problem in problems:
            out(f"  {problem}")
    return EXIT_OK if not problems else EXIT_STEP_FAILED
