"""The env lifecycle commands: `envs list`, `info`, `remove`, `completion`, and the confirmation a
run asks before it changes an existing env."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK, Refused

if TYPE_CHECKING:
    from verl_bootstrap.lifecycle.inspect import EnvSummary
    from verl_bootstrap.plan.model import Plan

__all__ = ["ask", "confirm_changes", "register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `envs`, `info`, `remove` and `completion`."""
    envs = sub.add_parser("envs", help="the envs verl-bootstrap has built")
    esub = envs.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = esub.add_parser("list", help="every env: profile, verl ref, variant, status, size")
    listing.add_argument("--no-size", action="store_true", help="skip measuring each env's size")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=cmd_envs_list)

    info = sub.add_parser("info", help="how an env was made, its last run, each step")
    info.add_argument("--prefix", type=path_arg, required=True)
    info.add_argument("--json", action="store_true")
    info.set_defaults(handler=cmd_info)

    remove = sub.add_parser("remove", help="delete an env (only what verl-bootstrap made)")
    remove.add_argument("--prefix", type=path_arg, required=True)
    remove.add_argument("--yes", "-y", action="store_true", help="do not ask first")
    remove.add_argument("--json", action="store_true")
    remove.set_defaults(handler=cmd_remove)

    completion = sub.add_parser("completion", help="print the shell completion script")
    completion.add_argument("shell", choices=["bash", "zsh", "fish"])
    completion.set_defaults(handler=cmd_completion)


def confirm_changes(plan: Plan, *, yes: bool) -> None:
    """Show what the run changes in an existing env; go on only with --yes or a yes at a prompt."""
    from verl_bootstrap.lifecycle.changes import changes_for

    changes = changes_for(plan)
    if changes is None:
        return
    err(f"this run changes the env at {plan.prefix}:\n  {changes.summary()}")
    if changes.blockers:
        raise Refused(
            f"this change cannot be applied in place: {'; '.join(changes.blockers)}; "
            f"{plan.prefix} was not changed",
            hint=f"build it in a new prefix: add --prefix {plan.prefix}-new to your command",
        )
    if not (yes or ask("apply these changes? [y/N] ")):
        raise Refused(
            f"{plan.prefix} was not changed", hint="re-run with --yes to apply these changes"
        )


def ask(question: str) -> bool:
    """A yes at a prompt on a terminal; no terminal is a no."""
    if not sys.stdin.isatty():
        return False
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def cmd_envs_list(ns: argparse.Namespace) -> int:
    """`envs list`."""
    from verl_bootstrap.lifecycle.inspect import summarize
    from verl_bootstrap.lifecycle.registry import known_prefixes

    envs = [summarize(p, size=not ns.no_size) for p in known_prefixes()]
    if ns.json:
        emit_json({"schema": "verl-bootstrap.envs/1", "envs": [_summary_json(e) for e in envs]})
        return EXIT_OK
    if not envs:
        out("no envs yet: `verl-bootstrap --profile NAME` builds one")
    for env in envs:
        out(_summary_line(env))
    return EXIT_OK


def _summary_json(env: EnvSummary) -> dict[str, Any]:
    return {**env.__dict__, "prefix": str(env.prefix)}


def _summary_line(env: EnvSummary) -> str:
    ref = f"verl {env.verl_ref}@{(env.commit or '?')[:12]}" if env.verl_ref else "-"
    verified = f"verified {_when(env.verified_at)}" if env.verified_at else "not verified"
    size = _size(env.size) if env.size is not None else ""
    fields = [str(env.prefix), env.status, env.profile or "-", ref, env.variant or "-", verified]
    return "  ".join([*fields, size]).rstrip()


def cmd_info(ns: argparse.Namespace) -> int:
    """`info --prefix P`."""
    from verl_bootstrap.lifecycle.inspect import describe

    body = describe(ns.prefix.absolute())
    if ns.json:
        emit_json({"schema": "verl-bootstrap.info/1", **body})
    else:
        out(_info_text(body))
    return EXIT_OK


def _info_text(body: dict[str, Any]) -> str:
    record, source, run = body["record"], body["source"], body["last_run"]
    options = {k: v for k, v in record.get("options", {}).items() if v not in (None, [], False)}
    pinned = source.get("commit") or source.get("sdist_sha256") or "?"
    lines = [
        f"env {body['prefix']}: {body['status']}",
        f"  profile   {record.get('profile_name', '?')} ({record.get('profile_hash', '?')[:19]})",
        f"  verl      {source.get('ref') or record.get('verl_ref')} at {pinned} "
        f"({source.get('kind', 'not fetched')}, {source.get('repo') or record.get('verl_repo')})",
        f"  variant   {record.get('variant')}, backend {record.get('backend')}",
        "  options   " + (" ".join(f"{k}={_flat(v)}" for k, v in options.items()) or "(none)"),
        f"  site      {', '.join(record.get('site_files', [])) or '(no site config)'}",
        f"  last run  {run.get('status', '?')}, started {_when(run.get('started'))}"
        + (f", logs {run['log_dir']}" if run.get("log_dir") else ""),
        "  steps",
    ]
    steps = body["steps"].items()
    lines += [f"    {k:18} {v['status']:11} {_when(v['finished'])}" for k, v in steps]
    lines.append(f"  lockfile  {body['lockfile'] or '(none yet)'}")
    lines.append(f"  activate  {body['activate'] or '(not verified yet)'}")
    return "\n".join(lines)


def cmd_remove(ns: argparse.Namespace) -> int:
    """`remove --prefix P`: what will go, a question, then the removal."""
    from verl_bootstrap.lifecycle.remove import check_removal, remove_env

    prefix = ns.prefix.absolute()
    removal = check_removal(prefix)
    err(f"remove {prefix} ({_size(removal.size)}): {', '.join(removal.entries) or 'state only'}")
    if not (ns.yes or ask("delete it? [y/N] ")):
        raise Refused(f"{prefix} was not removed", hint="pass --yes to remove it without asking")
    remove_env(prefix)
    if ns.json:
        emit_json({"removed": str(prefix), "entries": list(removal.entries)})
    else:
        out(f"removed {prefix}")
    return EXIT_OK


def cmd_completion(ns: argparse.Namespace) -> int:
    """`completion SHELL`: the script to source (or to install in the shell's completion folder)."""
    from verl_bootstrap.lifecycle.completion import shell_script

    out(shell_script(ns.shell))
    return EXIT_OK


def _flat(value: Any) -> str:
    if isinstance(value, list):
        return ",".join("=".join(v) if isinstance(v, list) else str(v) for v in value)
    return str(value)


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"


def _size(n: int | None) -> str:
    value = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
