"""The env lifecycle commands: `envs list`, `info`, `remove`, `completion`, and the confirmation a
run asks before it changes an existing env."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.flags import env_flag, json_flag
from verl_bootstrap.cli.output import emit_json, err, out
from verl_bootstrap.cli.planview import human_size
from verl_bootstrap.errors import EXIT_OK, Declined, InputError, Refused

if TYPE_CHECKING:
    from verl_bootstrap.lifecycle.inspect import EnvSummary
    from verl_bootstrap.lifecycle.state import State
    from verl_bootstrap.plan.model import Plan

__all__ = [
    "ask",
    "cmd_envs_prune",
    "cmd_run",
    "confirm",
    "confirm_changes",
    "flags_completion",
    "flags_envs_list",
    "flags_envs_prune",
    "flags_info",
    "flags_remove",
    "flags_run",
]


def flags_envs_list(p: argparse.ArgumentParser) -> None:
    """envs list."""
    p.add_argument("--no-size", action="store_true", help="skip measuring each env's size")
    json_flag(p)


def flags_envs_prune(p: argparse.ArgumentParser) -> None:
    """envs prune."""
    p.add_argument("--dry-run", action="store_true", help="list what would go; forget nothing")
    json_flag(p)


def flags_info(p: argparse.ArgumentParser) -> None:
    """info."""
    env_flag(p)
    json_flag(p)


def flags_remove(p: argparse.ArgumentParser) -> None:
    """remove."""
    env_flag(p)
    p.add_argument("--yes", "-y", action="store_true", help="do not ask first")
    p.add_argument("--dry-run", action="store_true", help="show what would go; delete nothing")
    p.add_argument(
        "--keep-source",
        action="store_true",
        help="remove the env but keep verl's checkout (src/verl) as it is, with your work in it",
    )
    json_flag(p)


def flags_run(p: argparse.ArgumentParser) -> None:
    """run [ENV] -- COMMAND...: the command is everything after `--` (cli.main splits it off)."""
    p.usage = "verl-bootstrap run [ENV] [--name NAME | --prefix PATH] -- COMMAND [ARG ...]"
    env_flag(p)
    p.add_argument("words", nargs="*", metavar="COMMAND", help="the command to run, after --")


def cmd_run(ns: argparse.Namespace) -> int:
    """`run NAME -- CMD`: the command inside the env, activated, the shell left as it was; its
    exit code is ours."""
    from verl_bootstrap import proc
    from verl_bootstrap.cli.options import chosen_env
    from verl_bootstrap.envs.activation import inside
    from verl_bootstrap.envs.base import env_python

    command = list(getattr(ns, "command_line", None) or ns.words)
    if not command:
        raise InputError(
            "run: no command given (it goes after --)",
            hint="verl-bootstrap run NAME -- python -c 'import verl'",
        )
    prefix = chosen_env(ns, command="run")
    if not env_python(prefix).exists():
        raise InputError(f"run: {prefix} is not an env (no {env_python(prefix)})")
    return proc.interactive(inside(prefix, command))


def flags_completion(p: argparse.ArgumentParser) -> None:
    """completion --shell SHELL (the shell is a flag, as in `activate` and `onboard`)."""
    p.add_argument(
        "--shell",
        choices=["bash", "zsh", "fish"],
        help="the shell to complete in (default: $SHELL)",
    )
    p.add_argument("old_shell", nargs="?", metavar="SHELL", help=argparse.SUPPRESS)


def confirm_changes(plan: Plan, state: State | None, *, yes: bool) -> None:
    """Show what the run changes in an existing env (its `state` as the run read it); go on only
    with --yes or a yes at a prompt."""
    from verl_bootstrap.lifecycle.changes import changes_for

    changes = changes_for(plan, state)
    if changes is None:
        return
    err(f"this run changes the env at {plan.prefix}:\n  {changes.summary()}")
    if changes.blockers:
        raise Refused(
            f"this change cannot be applied in place: {'; '.join(changes.blockers)}; "
            f"{plan.prefix} was not changed",
            hint=f"build it in a new prefix: add --prefix {plan.prefix}-new to your command",
        )
    if not yes:
        confirm(
            "apply these changes? [y/N] ",
            f"{plan.prefix} was not changed",
            "re-run with --yes to apply these changes",
        )


def confirm(question: str, unchanged: str, hint: str) -> None:
    """Go on after a yes at the prompt. A no is the user's answer, not an error (Declined, exit
    0); with no terminal to ask on, the run is refused (exit 3), so a script never hangs."""
    if not sys.stdin.isatty():
        raise Refused(f"{unchanged}: no terminal to ask on", hint=hint)
    if not ask(question):
        raise Declined(unchanged)


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
        return EXIT_OK
    rows = [_HEADER, *(_summary_row(env) for env in envs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER) - 1)]
    for row in rows:
        out("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip())
    gone = sum(env.status == "missing" for env in envs)
    if gone:
        out(f"{gone} env(s) missing: `verl-bootstrap envs prune` forgets them")
    return EXIT_OK


def _summary_json(env: EnvSummary) -> dict[str, Any]:
    from verl_bootstrap.lifecycle.registry import env_name

    return {"name": env_name(env.prefix), **env.__dict__, "prefix": str(env.prefix)}


_HEADER = ("NAME", "PREFIX", "STATUS", "PROFILE", "VERL", "VARIANT", "VERIFIED", "SIZE")


def _summary_row(env: EnvSummary) -> tuple[str, ...]:
    verified = _when(env.verified_at) if env.verified_at else "no"
    size = human_size(env.size) if env.size is not None else ""
    from verl_bootstrap.lifecycle.registry import env_name

    fields = (
        env_name(env.prefix),
        str(env.prefix),
        env.status,
        env.profile or "-",
        verl_pin(env.verl_ref, env.commit, env.source_kind),
        env.variant or "-",
        verified,
        size,
    )
    return fields


def verl_pin(ref: str | None, digest: str | None, kind: str | None) -> str:
    """verl's ref and what pins it, named as what it is: a git commit or the sdist's sha256."""
    if not ref:
        return "-"
    if not digest:
        return ref
    label = "sdist sha256:" if kind == "sdist" else "commit "
    return f"{ref} ({label}{digest[:12]})"


def cmd_envs_prune(ns: argparse.Namespace) -> int:
    """`envs prune`: forget the listed envs whose folder is gone (deleted by hand)."""
    from verl_bootstrap.lifecycle.registry import gone_prefixes, prune

    gone = gone_prefixes() if ns.dry_run else prune()
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.prune/1",
                "dry_run": ns.dry_run,
                "forgotten": [str(p) for p in gone],
            }
        )
        return EXIT_OK
    verb = "would forget" if ns.dry_run else "forgot"
    for prefix in gone:
        out(f"{verb} {prefix} (its folder is gone)")
    if not gone:
        out("nothing to prune: every listed env is still there")
    return EXIT_OK


def cmd_info(ns: argparse.Namespace) -> int:
    """`info --prefix P`."""
    from verl_bootstrap.cli.options import chosen_env
    from verl_bootstrap.lifecycle.inspect import describe

    body = describe(chosen_env(ns, command="info"))
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
        f"  profile   {record.get('profile_name', '?')} ({record.get('profile_hash', '?')[:19]})",
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


def cmd_remove(ns: argparse.Namespace) -> int:
    """`remove --prefix P`: what will go, a question, then the removal."""
    from verl_bootstrap.cli.options import chosen_env
    from verl_bootstrap.lifecycle.remove import check_removal, remove_env

    if ns.prefix is None and ns.env is None and ns.name is None:
        raise InputError(
            "remove: which env? name it (`verl-bootstrap remove NAME`) or give --prefix PATH",
            hint="`verl-bootstrap envs list` shows the envs and their names",
        )
    prefix = ns.prefix.absolute() if ns.prefix is not None else chosen_env(ns, command="remove")
    if not prefix.exists():
        raise InputError(
            f"{prefix} is not there (deleted by hand?)",
            hint="`verl-bootstrap envs prune` forgets the records of envs whose folder is gone",
        )
    removal = check_removal(prefix, keep_source=ns.keep_source)
    kept = f", keeping {removal.kept}" if removal.kept else ""
    what = ", ".join(removal.entries) or "state only"
    err(f"remove {prefix} ({human_size(removal.size)}): {what}{kept}")
    if ns.dry_run:
        if ns.json:
            emit_json({"removed": None, "dry_run": True, "entries": list(removal.entries)})
        return EXIT_OK
    if not ns.yes:
        confirm("delete it? [y/N] ", f"{prefix} was not removed", "pass --yes to remove it")
    remove_env(prefix, keep_source=ns.keep_source)
    if ns.json:
        emit_json(
            {
                "removed": str(prefix),
                "entries": list(removal.entries),
                "kept": None if removal.kept is None else str(removal.kept),
            }
        )
    else:
        out(f"removed {prefix}{kept}")
    return EXIT_OK


def cmd_completion(ns: argparse.Namespace) -> int:
    """`completion --shell SHELL`: the script to source (or to install in the shell's completion
    folder)."""
    import os

    from verl_bootstrap.lifecycle.completion import shell_script
    from verl_bootstrap.onboard import default_shell

    if ns.old_shell is not None:
        raise InputError(
            f"completion takes the shell as a flag, not as the word {ns.old_shell!r}",
            hint=f"verl-bootstrap completion --shell {ns.old_shell}",
        )
    out(shell_script(ns.shell or default_shell(os.environ)))
    return EXIT_OK


def _flat(value: Any) -> str:
    if isinstance(value, list):
        return ",".join("=".join(v) if isinstance(v, list) else str(v) for v in value)
    return str(value)


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"
