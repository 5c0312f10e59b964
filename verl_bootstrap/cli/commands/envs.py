"""`envs list|prune`: the envs verl-bootstrap has built; forget those whose folder is gone.

An env's status is its last run's, checked now against its record (run.repair.record_drift, the
check every run makes: dist-info folders only, 0.12 s for the cpu env, docs/envs.md): one whose
packages changed since is `drifted`, whatever its last verify said; each env that is not ok gets
the command that repairs or resumes it."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.flags import dry_run_flag, json_flag
from verl_bootstrap.cli.output import emit_json, out
from verl_bootstrap.cli.planview import human_size
from verl_bootstrap.errors import EXIT_OK

if TYPE_CHECKING:
    from verl_bootstrap.run.state.inspect import EnvSummary

__all__ = ["checked_status", "cmd_list", "cmd_prune", "flags_list", "flags_prune", "verl_pin"]


def flags_list(p: argparse.ArgumentParser) -> None:
    """envs list."""
    p.add_argument("--no-size", action="store_true", help="skip measuring each env's size")
    json_flag(p)


def flags_prune(p: argparse.ArgumentParser) -> None:
    """envs prune."""
    dry_run_flag(p, "list what would go; forget nothing")
    json_flag(p)


def cmd_list(ns: argparse.Namespace) -> int:
    """`envs list`."""
    from verl_bootstrap.run.state.envindex import known_prefixes
    from verl_bootstrap.run.state.inspect import summarize

    checked = [_checked(summarize(p, size=not ns.no_size)) for p in known_prefixes()]
    envs = [env for env, _ in checked]
    if ns.json:
        body = [{**_summary_json(e), "drift": _listed(d)} for e, d in checked]
        emit_json({"schema": "verl-bootstrap.envs/1", "envs": body})
        return EXIT_OK
    if not envs:
        out("no envs yet: `verl-bootstrap --profile NAME` builds one")
        return EXIT_OK
    rows = [_HEADER, *(_summary_row(env) for env in envs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER) - 1)]
    for row in rows:
        out("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip())
    for env, drift in checked:
        for line in _way_out(env, drift):
            out(line)
    gone = sum(env.status == "missing" for env in envs)
    if gone:
        out(f"{gone} env(s) missing: `verl-bootstrap envs prune` forgets them")
    for env in envs:  # why, so that it is never mistaken for a broken env of one's own
        if env.not_yours:
            out(f"not yours: {env.not_yours} (nothing in it is run or read)")
    return EXIT_OK


DRIFTED = "drifted"
_RESUMABLE = ("failed", "interrupted", "killed")


def checked_status(prefix: Path, status: str) -> tuple[str, tuple[str, ...] | None]:
    """An env's status with its packages checked against its record, and what drifted (a
    finished env's only, None otherwise: a failed or running one is mid-way, its record not yet
    its truth)."""
    from verl_bootstrap.run.repair import record_drift

    if status not in ("ok", "verify failed"):
        return status, None
    drift = record_drift(prefix)
    return (DRIFTED if drift else status), drift


def _checked(env: EnvSummary) -> tuple[EnvSummary, tuple[str, ...] | None]:
    from dataclasses import replace

    status, drift = checked_status(env.prefix, env.status)
    return replace(env, status=status), drift


def _listed(drift: tuple[str, ...] | None) -> list[str] | None:
    return None if drift is None else list(drift)


def _way_out(env: EnvSummary, drift: tuple[str, ...] | None) -> tuple[str, ...]:
    """The lines under the table for one env that is not ok: what is wrong, and what to run."""
    from verl_bootstrap.run.state.envindex import env_name
    from verl_bootstrap.run.state.hints import next_step, resume_command

    name = env_name(env.prefix)
    if env.status in (DRIFTED, "verify failed"):
        return tuple(f"{name}: {line}" for line in next_step(env.prefix, drift))
    if env.status in _RESUMABLE:
        return (f"{name}: its last run {env.status}; resume it: {resume_command(env.prefix)}",)
    return ()


def _summary_json(env: EnvSummary) -> dict[str, Any]:
    from verl_bootstrap.run.state.envindex import env_name

    return {"name": env_name(env.prefix), **env.__dict__, "prefix": str(env.prefix)}


_HEADER = ("NAME", "PREFIX", "STATUS", "PROFILE", "VERL", "VARIANT", "VERIFIED", "SIZE")


def _summary_row(env: EnvSummary) -> tuple[str, ...]:
    verified = _when(env.verified_at) if env.verified_at else "no"
    size = human_size(env.size) if env.size is not None else ""
    from verl_bootstrap.run.state.envindex import env_name

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


def cmd_prune(ns: argparse.Namespace) -> int:
    """`envs prune`: forget the listed envs whose folder is gone (deleted by hand) or is another
    user's now (a purged /tmp or /scratch prefix made again)."""
    from verl_bootstrap.run.state.envindex import gone_prefixes, prune, why_gone

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
        out(f"{verb} {prefix} ({why_gone(prefix)})")
    if not gone:
        out("nothing to prune: every listed env is still there")
    return EXIT_OK


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"
