"""Step `fetch-source`: verl's checkout (git, the locked sdist, or the release sdist fallback)."""

from __future__ import annotations

from verl_bootstrap.events import emit
from verl_bootstrap.installer.cmdline import pip_launcher
from verl_bootstrap.lock.installing.lockedsteps import check_source, fetch_locked_sdist
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import FetchSourceInputs, SourceOutputs
from verl_bootstrap.redact import redact
from verl_bootstrap.run.steps.stepcontext import StepContext
from verl_bootstrap.source.fetch import fetch_source

__all__ = ["describe", "execute", "locked_sdist"]


def locked_sdist(plan: Plan) -> str:
    """The release sdist the plan's lock pins verl to ("name, sha256 …"), or "" (a git lock, or
    no lock: the checkout comes from git, the sdist only when the repo is unreachable)."""
    verl = plan.locked.lock.verl if plan.locked is not None else None
    if verl is None or verl.kind != "sdist" or not verl.sdist_sha256:
        return ""
    return f"{verl.sdist or 'verl'} (sha256 {verl.sdist_sha256[:12]})"


def describe(plan: Plan) -> Step:
    src = plan.source
    sdist = locked_sdist(plan)
    if sdist:  # the lock pins the release sdist: fetched by sha256, the repo never asked
        return _locked_sdist_step(plan, sdist)
    command = (
        "git",
        "clone",
        "--depth",
        "1",
        "--branch",
        src.ref,
        redact(src.repo),
        str(src.checkout),
    )
    fallback = (  # a branch or a commit names no release: no sdist stands in for it
        f"if unreachable: verl=={src.release} sdist from the index"
        if src.sdist_fallback and src.release
        else ""
    )
    said = f"get verl {src.ref} from {redact(src.repo)}" + (f" ({fallback})" if fallback else "")
    return Step(
        id="fetch-source",
        kind="fetch-source",
        deps=(),
        description=said,
        commands=(command,),
        inputs=FetchSourceInputs(repo=src.repo, ref=src.ref, fallback=src.sdist_fallback),
    )


def _locked_sdist_step(plan: Plan, sdist: str) -> Step:
    """verl's locked release sdist: downloaded by the tool and checked by its sha256, no git (so
    the step shows no command: nothing but the tool itself runs)."""
    src = plan.source
    assert plan.locked is not None
    artifact = plan.locked.artifacts.get("verl")
    where = f"from {redact(artifact.url)}" if artifact else "from the tool's cache"
    said = f"get verl {src.ref}: its release sdist {sdist}, {where}, unpacked into {src.checkout}"
    return Step(
        id="fetch-source",
        kind="fetch-source",
        deps=(),
        description=said,
        inputs=FetchSourceInputs(
            repo=src.repo, ref=src.ref, sdist_sha256=plan.locked.lock.verl.sdist_sha256
        ),
    )


def execute(ctx: StepContext) -> SourceOutputs:
    # --locked: the checked sdist, cached by sha256 (None: fetched as the plan's source says)
    result = fetch_locked_sdist(ctx.plan.source, ctx.plan.locked, log_path=ctx.log_path)
    if result is None:
        result = fetch_source(
            ctx.plan.source,
            ctx.plan.settings,
            pip=pip_launcher(),
            log_path=ctx.log_path,
            offline=ctx.plan.offline,
        )
    check_source(ctx.plan.lockfile, result)  # a locked verl is checked before anything installs
    if result.note:  # e.g. git was unreachable and verl's release sdist stands in: say so
        emit(result.note, kind=("note",), step=ctx.step.id)
    return SourceOutputs.of(result)
