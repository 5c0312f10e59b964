"""Plans and run reports as text and as JSON (pure functions; the CLI prints them)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from verl_bootstrap.redact import redact
from verl_bootstrap.run.state.hints import resume_command

if TYPE_CHECKING:
    from verl_bootstrap.plan.graph import Plan, Step
    from verl_bootstrap.run.installrun import InstallResult
    from verl_bootstrap.run.summary import EnvFacts

__all__ = [
    "PLAN_SCHEMA",
    "REPORT_SCHEMA",
    "human_size",
    "plan_json",
    "plan_text",
    "report_json",
    "summary_text",
]

PLAN_SCHEMA = "verl-bootstrap.plan/1"
REPORT_SCHEMA = "verl-bootstrap.install/1"


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan as one JSON document."""
    fingerprints = plan.fingerprints()
    return {
        "schema": PLAN_SCHEMA,
        "profile": plan.profile.name,
        "prefix": str(plan.prefix),
        "backend": plan.backend,
        "variant": plan.variant,
        "variant_reason": plan.variant_reason,
        "verl": {"repo": redact(plan.source.repo), "ref": plan.source.ref},
        "route": route_json(plan),
        "notes": list(plan.notes),
        "hash_gaps": plan.hash_gaps,
        "steps": [
            {
                "id": s.id,
                "kind": s.kind,
                "deps": list(s.deps),
                "description": s.description,
                "commands": [list(c) for c in s.commands],
                "env": dict(s.env),
                **_kernel_json(plan, s.id),
                "fingerprint": fingerprints[s.id],
            }
            for s in plan.steps
        ],
    }


def _kernel_json(plan: Plan, step_id: str) -> dict[str, Any]:
    decision = plan.kernels.get(step_id)
    if decision is None:
        return {}
    sizing = decision.sizing
    kernel = {
        "source": decision.choice.source,
        "reason": decision.choice.reason,
        "wheel": decision.choice.wheel,
        "origin": decision.choice.origin,  # the declared source: official, community, ...
        "trust": decision.choice.trust,
        # a source build or the stage's install: the sources passed over, as its reason says
        "passed_over": [p.to_json() for p in decision.choice.passed],
        # a whole wheel of another distribution, and the stage's parts it holds (left out)
        "distribution": decision.choice.distribution,
        "replaces": list(decision.choice.replaces),
        "unpinned": decision.choice.unpinned,  # a --locked wheel the lockfile does not pin
        "unnamed": list(decision.choice.unnamed),  # key fields its file name does not state
        "built_for": decision.choice.built_for.to_json() if decision.choice.built_for else None,
        "expected_key": decision.key.to_json(),
        "cuda_archs": list(sizing.archs),
        "cuda_archs_reason": sizing.arch_reason,
        "max_jobs": sizing.max_jobs,
        "max_jobs_reason": sizing.jobs_reason,
        "builds": bool(decision.kept),  # the plan expects a source build (else only a fallback)
        # a source build's estimate on this host, in minutes (None: the profile gives no figure)
        "build_minutes": None if decision.minutes is None else round(decision.minutes),
    }
    return {"kernel": kernel}


def route_json(plan: Plan) -> dict[str, Any]:
    """Which route the run takes: a lockfile (which, whose) or resolving (and why)."""
    locked = plan.locked
    return {
        "kind": "resolve" if locked is None else "lockfile",
        "line": plan.route,
        "lockfile": None if locked is None else str(locked.path),
        "origin": None if locked is None else locked.origin,
    }


def plan_text(plan: Plan) -> str:
    """The plan for a person to read."""
    lines = [
        plan.route,
        f"profile {plan.profile.name} → {plan.prefix} ({plan.backend})",
        f"CUDA variant: {plan.variant} ({plan.variant_reason})",
        f"verl: {redact(plan.source.repo)} @ {plan.source.ref}",
    ]
    lines += [f"note: {n}" for n in plan.notes]
    lines += plan.hash_gaps
    shared = _shared_index_flags([c for s in plan.steps for c in s.commands])
    if shared:
        lines.append(f"{_INDEX_MARK}, in every install below: {shlex.join(shared)}")
    for number, step in enumerate(plan.steps, 1):
        after = f"  (after {', '.join(step.deps)})" if step.deps else "  (no dependencies)"
        lines.append(f"{number}. {step.id} [{step.kind}]{after}")
        lines += [f"   {line}" for line in step.description.splitlines()]
        lines += _env_line(plan, step)
        lines += [f"   $ {_shown(c, shared)}" for c in step.commands]
    return "\n".join(lines)


def _env_line(plan: Plan, step: Step) -> list[str]:
    """The variables the step runs with that its description has not stated, each once, and
    where MAX_JOBS comes from when the host's sizing set it."""
    env = {k: v for k, v in sorted(step.env.items()) if k not in step.env_said}
    if not env:
        return []
    shown = redact(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
    decision = plan.kernels.get(step.id)
    if decision is not None and "MAX_JOBS" in env:
        why = decision.sizing.jobs_reason
        shown += f" (MAX_JOBS {why})" if why.startswith("from ") else f" (MAX_JOBS: {why})"
    return [f"   env: {shown}"]


# The index flags of the install commands: the same long run of them in every command, so the
# text plan says them once (`plan --json` keeps each command whole).
_INDEX_FLAGS = frozenset(
    {
        "--index-url",
        "--extra-index-url",
        "--find-links",
        "--index-strategy",
        "--default-index",
        "--index",
    }
)
_INDEX_SWITCHES = frozenset({"--no-sources", "--no-index"})
_INDEX_MARK = "[index flags]"


def _is_install(command: tuple[str, ...]) -> bool:
    return len(command) > 2 and command[1:3] == ("pip", "install")


def _index_flags(command: tuple[str, ...]) -> tuple[str, ...]:
    found: list[str] = []
    words = iter(command)
    for word in words:
        if word in _INDEX_FLAGS:
            found += [word, next(words, "")]
        elif word in _INDEX_SWITCHES:
            found.append(word)
    return tuple(found)


def _shared_index_flags(commands: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The index flags every install command carries alike (none when they differ)."""
    installs = [_index_flags(c) for c in commands if _is_install(c)]
    if len(installs) < 2 or len(set(installs)) != 1:
        return ()
    return installs[0]


def _shown(command: tuple[str, ...], shared: tuple[str, ...]) -> str:
    """An install command with the shared index flags as one mark and what it installs first
    (after `pip install`); any other command as it is."""
    if not shared or not _is_install(command):
        return shlex.join(command)
    head, rest = list(command[:3]), list(command[3:])
    words: list[str] = []
    kept: list[str] = []
    flags = set(shared)
    i = 0
    while i < len(rest):
        word = rest[i]
        if word in _INDEX_FLAGS and word in flags:
            i += 2
            continue
        if word in _INDEX_SWITCHES and word in flags:
            i += 1
            continue
        takes_value = word.startswith("-") and word not in _SWITCHES and i + 1 < len(rest)
        if takes_value:
            kept += [word, rest[i + 1]]
            i += 2
            continue
        (kept if word.startswith("-") else words).append(word)
        i += 1
    return " ".join([shlex.join(head + words), _INDEX_MARK, shlex.join(kept)]).rstrip()


# install flags that take no value (the others do): what lets the text plan find the packages
_SWITCHES = frozenset(
    {
        "--no-deps",
        "--no-build-isolation",
        "--offline",
        "--upgrade",
        "-U",
        "--require-hashes",
        "--no-build",
        "--reinstall",
        "--compile-bytecode",
        "--no-sources",
        "--no-index",
        "--strict",
        "--system",
        "-q",
        "--quiet",
        "--verify-hashes",
        "--no-binary",
        "--require-build-hashes",
        "--no-cache",
        "--no-config",
    }
)


def report_json(result: InstallResult) -> dict[str, Any]:
    """A finished run as one JSON document."""
    report = result.report
    return {
        "schema": REPORT_SCHEMA,
        "ok": result.ok,
        "profile": result.plan.profile.name,
        "prefix": str(result.plan.prefix),
        "variant": result.plan.variant,
        "route": route_json(result.plan),
        "activate": result.activate,
        "log_dir": str(report.log_dir),
        "steps": [
            {
                "id": o.id,
                "status": o.status.value,
                "seconds": round(o.seconds, 2),
                "reason": o.reason,
                "log": o.log,
            }
            for o in report.outcomes
        ],
        "verify": report.outputs.get("verify", {}).get("verify"),
        "drift": result.drift.to_json(),
    }


def _identity(text: str, style: str) -> str:
    return text


_STATUS_STYLE = {
    "done": "ok",
    "failed": "fail",
    "skipped": "dim",
    "aborted": "dim",
    "interrupted": "warn",
}


def summary_text(
    result: InstallResult,
    facts: EnvFacts | None = None,
    *,
    paint: Callable[[str, str], str] = _identity,
) -> str:
    """The closing summary: each step, the run's totals, then the activation line or the failure
    and how to resume. `paint(text, style)` colours it for a terminal."""
    report = result.report
    lines = ["", paint("summary:", "bold")]
    for o in report.outcomes:
        status = paint(f"{o.status.value:11}", _STATUS_STYLE.get(o.status.value, ""))
        lines.append(f"  {o.id:22} {status} {o.seconds:7.1f}s")
    if facts is not None:
        lines += _facts(facts)
    failed = report.failed()
    if failed is not None:
        lines += ["", paint(f"step {failed.id!r} failed: {failed.reason}", "fail")]
        if failed.tail:
            lines += ["  last lines of its output:"] + [f"  | {t}" for t in failed.tail[-15:]]
        if failed.hint:
            lines.append(f"hint: {failed.hint}")
        lines.append(f"full log: {failed.log}")
        lines.append(f"resume with: {resume_command(result.plan.prefix)}")
    elif result.drift.cannot:
        lines += ["", paint("not verified: the env differs from its record", "fail")]
        lines += [f"  {line}" for line in result.drift.cannot]
        lines.append(
            "hint: remove the env and install it again, or re-run with the stage's options"
        )
    elif result.activate:
        lines += ["", paint("verified.", "ok") + " Enter the env with:", f"  {result.activate}"]
    return "\n".join(lines)


def _facts(facts: EnvFacts) -> list[str]:
    lines = [
        f"  {'total':22} {'':11} {facts.seconds:7.1f}s",
        f"  env: {facts.packages} packages, "
        + ("unchanged" if facts.size is None else human_size(facts.size)),
    ]
    if facts.lockfile_used is not None:
        lines.append(f"  lockfile installed: {facts.lockfile_used}")
    if facts.lockfile_written is not None:
        lines.append(f"  lockfile written: {facts.lockfile_written}")
    return lines


def human_size(n: int | None) -> str:
    """Bytes as a person reads them (1.2 GiB)."""
    value = float(n or 0)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
