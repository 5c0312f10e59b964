"""Subcommands of the lab wheelhouse: `wheelhouse list | add WHEEL --key ... | check`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import config_flag, dry_run_flag, json_flag
from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_STEP_FAILED, InputError

if TYPE_CHECKING:
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
    dry_run_flag(add, "check the wheel and its key; publish nothing")
    _house_flags(add)


def flags_check(p: argparse.ArgumentParser) -> None:
    """wheelhouse check."""
    _house_flags(p)


def _house_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(  # a string: a URL is not a path (Path would fold `//` and keep it)
        "--wheelhouse", metavar="FOLDER_OR_URL", help="default: the site config's"
    )
    config_flag(parser, "a site config file or URL")
    json_flag(parser)


def _house(ns: argparse.Namespace) -> AnyWheelhouse:
    from verl_bootstrap.kernels.kernelcmd import chosen_wheelhouse

    return chosen_wheelhouse(ns.wheelhouse, ns.config, os.environ)


def cmd_list(ns: argparse.Namespace) -> int:
    """`wheelhouse list`."""
    from verl_bootstrap.events import listening

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
    from verl_bootstrap.kernels.kernelcmd import publish_key
    from verl_bootstrap.kernels.wheeltags import refuse_contradictions

    key = publish_key(ns.key, ns.key_of, hint=_KEY_HELP)
    if ns.dry_run or house.writable():  # else the wheelhouse refuses first, saying why
        refuse_contradictions(Path(ns.wheel), key)  # before anything is written where a lab reads
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


def cmd_check(ns: argparse.Namespace) -> int:
    """`wheelhouse check`: exit 2 when a wheel's tags or contents contradict its key, 1 when any
    wheel is missing or changed."""
    house = _house(ns)
    found = house.check()
    problems = found.all
    if ns.json:
        body = {"ok": not problems, "problems": problems, "misfiled": found.misfiled}
        emit_json({"wheelhouse": house.shown(), **body})
    else:
        count = len(house.entries())
        out(f"wheelhouse {house.shown()}: {count} wheel(s), {len(problems)} problem(s)")
        for problem in problems:
            out(f"  {problem}")
    if found.misfiled:  # a wheel filed under a key it contradicts: bad input
        return EXIT_BAD_INPUT
    return EXIT_OK if not problems else EXIT_STEP_FAILED
