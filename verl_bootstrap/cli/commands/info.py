"""`info`: how an env was made, its last run, each step."""

from __future__ import annotations

import argparse
import time
from typing import Any

from verl_bootstrap.cli.flags import env_flag, json_flag
from verl_bootstrap.cli.output import emit_json, out
from verl_bootstrap.errors import EXIT_OK

__all__ = ["cmd_info", "flags_info"]


def flags_info(p: argparse.ArgumentParser) -> None:
    """info."""
    env_flag(p)
    json_flag(p)


def cmd_info(ns: argparse.Namespace) -> int:
    """`info --prefix P`."""
    from verl_bootstrap.cli.commands.envs import checked_status
    from verl_bootstrap.cli.optionsbuilder import chosen_env
    from verl_bootstrap.run.state.inspect import describe

    prefix = chosen_env(ns, command="info")
    body = describe(prefix)
    status, drift = checked_status(prefix, body["status"])  # as `envs list` says it
    body = {**body, "status": status, "drift": None if drift is None else list(drift)}
    if ns.json:
        emit_json({"schema": "verl-bootstrap.info/1", **body})
    else:
        out(_info_text(body))
    return EXIT_OK


def _info_text(body: dict[str, Any]) -> str:
    record, source, run = body["record"], body["source"], body["last_run"]
    options = {k: v for k, v in record.get("options", {}).items() if v not in (None, [], False)}
    ref = source.get("ref") or record.get("verl_ref")
    if source.get("kind") == "sdist":
        name = source.get("sdist_name") or "verl"
        pinned = f"its release sdist {name} (sha256 {source.get('sdist_sha256')})"
    elif source.get("commit"):
        pinned = f"commit {source['commit']} of {source.get('repo') or record.get('verl_repo')}"
    else:
        pinned = f"not fetched yet, from {record.get('verl_repo')}"
    lines = [
        f"env {body['prefix']}: {body['status']}",
        *_drift_lines(body),
        f"  profile   {record.get('profile_name', '?')} (profile hash "
        f"{record.get('profile_hash', '?')[:19]})",
        f"  verl      {ref}, {pinned}",
        f"  variant   {record.get('variant')}, backend {record.get('backend')}",
        f"  from      {_origin(record)}",
        "  options   " + (" ".join(f"{k}={_flat(v)}" for k, v in options.items()) or "(none)"),
        f"  site      {', '.join(record.get('site_files', [])) or '(no site config)'}",
        f"  last run  {run.get('status', '?')}, started {_when(run.get('started'))}"
        + (f", logs {run['log_dir']}" if run.get("log_dir") else ""),
        *_verify_line(body["verified"]),
        "  steps",
    ]
    steps = body["steps"].items()
    lines += [f"    {k:18} {v['status']:11} {_when(v['finished'])}" for k, v in steps]
    lines.append(f"  lockfile  {body['lockfile'] or '(none yet)'}")
    lines.append(f"  activate  {body['activate'] or '(not verified yet)'}")
    return "\n".join(lines)


def _drift_lines(body: dict[str, Any]) -> list[str]:
    """What changed since the env was recorded, and the command that puts it back."""
    if not body["drift"]:
        return []
    from pathlib import Path

    from verl_bootstrap.run.state.hints import resume_command

    lines = [f"  drift     {line}" for line in body["drift"]]
    return [*lines, f"  repair    {resume_command(Path(body['prefix']))}"]


def _verify_line(check: dict[str, Any]) -> list[str]:
    """The last standalone `verify`: when, and what failed."""
    if not check:
        return []
    outcome = "passed" if check.get("ok") else "FAILED: " + ", ".join(check.get("failed") or ())
    against = f" (against {check['against']})" if check.get("against") else ""
    return [f"  verify    {outcome}{against}, {_when(check.get('at'))}"]


def _origin(record: dict[str, Any]) -> str:
    """The lockfile the env was installed from, or that it was resolved (and why)."""
    lock = record.get("lockfile")
    if isinstance(lock, dict):
        return f"lockfile {lock.get('path')} ({lock.get('origin')}, hash-checked)"
    return str(record.get("route") or "resolved (made before routes were recorded)")


def _flat(value: Any) -> str:
    if isinstance(value, list):
        return ",".join("=".join(v) if isinstance(v, list) else str(v) for v in value)
    return str(value)


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"
