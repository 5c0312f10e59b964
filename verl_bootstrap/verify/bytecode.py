"""The per-user bytecode store: an env's first import reuses what an earlier env compiled.

uv compiles no bytecode, so without this every new env's first import (verify's) compiles the
thousands of modules it touches. Before verify's imports the env's interpreter links the stored
pycs of its sources into place (restore); after them it stores those Python just compiled
(harvest). Entries are checked-hash pycs (PEP 552), used only for exactly the source they were
compiled from; the work itself is the probe verl_bootstrap/probes/bytecode.py.

An optimisation only: any failure here is written to the step's log and reported, never raised.
Off when $VERL_BOOTSTRAP_NO_BYTECODE_CACHE is set to a non-empty value other than 0. The user's
PYTHONDONTWRITEBYTECODE does not turn it off: the imports it harvests are the tool's own probe over
the tool's own env (see `compiling_environment`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.paths import PROBES, bytecode_store, checkout_dir, private_folder

__all__ = ["OPT_OUT", "compiling_environment", "enabled", "harvest", "restore", "summary"]

OPT_OUT = "VERL_BOOTSTRAP_NO_BYTECODE_CACHE"
PROBE = PROBES / "bytecode.py"
_MARK = "@@BYTECODE@@"
_TIMEOUT_S = 600.0


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when the user turned the store off."""
    value = (os.environ if environ is None else environ).get(OPT_OUT, "")
    return value.strip() in ("", "0")


def compiling_environment(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """What the probe whose imports are harvested adds to its environment: Python writes its pycs.

    PYTHONDONTWRITEBYTECODE (set on CI, in many images and on shared hosts) would leave the store
    empty and every env's first import cold. That probe is the tool's own process over the tool's
    own env, so its imports compile as pip's install would have; the user's own processes still
    follow the variable. With the store off nothing changes.
    """
    return {"PYTHONDONTWRITEBYTECODE": None} if enabled(environ) else {}


def restore(python: Path, prefix: Path, log_path: Path | None) -> dict[str, Any]:
    """Link stored pycs into the env for its sources that have none yet."""
    return _run("restore", python, prefix, log_path)


def harvest(python: Path, prefix: Path, log_path: Path | None) -> dict[str, Any]:
    """Store the pycs Python compiled in the env that the store lacks."""
    return _run("harvest", python, prefix, log_path)


def summary(restored: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """What the store did around verify's imports, for its outputs."""
    shown = {
        "restored": restored.get("restored", 0),
        "stored": stored.get("stored", 0),
        "seconds": round(restored.get("seconds", 0.0) + stored.get("seconds", 0.0), 2),
    }
    if stored.get("not_own"):  # e.g. a umask that makes files group-writable
        shown["not_stored_writable_by_others"] = stored["not_own"]
    errors = restored.get("errors", 0) + stored.get("errors", 0)
    if errors:  # files the probe could not read or write (the first is in the step's log)
        shown["errors"] = errors
    problems = [a.get("error") or a.get("off") for a in (restored, stored)]
    if any(problems):
        shown["note"] = "; ".join(dict.fromkeys(p for p in problems if p))
    return shown


def _run(mode: str, python: Path, prefix: Path, log_path: Path | None) -> dict[str, Any]:
    if not enabled():
        return {"mode": mode, "off": f"${OPT_OUT} is set"}
    try:
        return _ask(mode, python, prefix, log_path)
    except (BootstrapError, OSError, ValueError) as exc:
        message = exc.message if isinstance(exc, BootstrapError) else str(exc)
        _note(log_path, f"bytecode {mode} skipped: {message}")
        return {"mode": mode, "error": message}


def _ask(mode: str, python: Path, prefix: Path, log_path: Path | None) -> dict[str, Any]:
    request = {"mode": mode, "store": str(_private_store()), "trees": _trees(prefix)}
    done = proc.run(
        [str(python), "-I", str(PROBE), json.dumps(request)],
        log_path=log_path,
        check=False,
        keep_output=True,
        timeout=_TIMEOUT_S,
    )
    answer: dict[str, Any] | None = proc.marked(done.output, _MARK)
    if answer is not None:
        return answer
    raise ValueError(f"the bytecode probe did not answer (exit {done.returncode})")


def _trees(prefix: Path) -> list[str]:
    """verl's editable checkout: its sources are in no RECORD, so the probe hashes them."""
    checkout = checkout_dir(prefix)
    return [str(checkout)] if checkout.is_dir() else []


def _private_store() -> Path:
    """The store's folder, made 0700; refused when it is a symlink, another user's, or writable
    by others (a pyc is code: whoever can write the store can run code in every env)."""
    root = bytecode_store()
    why = private_folder(root)
    if why is not None:
        raise ValueError(f"{root} {why}: not used")
    return root


def _note(log_path: Path | None, line: str) -> None:
    if log_path is None:
        return
    with log_path.open("a", encoding="utf-8") as log:
        log.write(line + "\n")
