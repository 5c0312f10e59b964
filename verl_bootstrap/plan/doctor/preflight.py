"""The install's preflight: doctor's preflight checks on a compiled plan, before any download."""

from __future__ import annotations

import os
from collections.abc import Mapping

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from verl_bootstrap.installer.envs.condarc import channel_urls, load_condarc
from verl_bootstrap.kernels.planning import KernelDecision
from verl_bootstrap.plan.doctor.doctorrun import PREFLIGHT_CHECKS, run_doctor
from verl_bootstrap.plan.doctor.inputs import DoctorInputs
from verl_bootstrap.plan.doctor.results import CheckResult
from verl_bootstrap.plan.graph import Plan

__all__ = ["inputs_from_plan", "plan_urls", "preflight_failures", "run_preflight_checks"]


def default_index_url() -> str | None:
    """The installers' own default index, as pip names it (we write no index host ourselves)."""
    try:
        from pip._internal.models.index import PyPI  # noqa: PLC0415 - stable for a decade

        return str(PyPI.simple_url)
    except (ImportError, AttributeError):
        return None


def _index_urls(plan: Plan) -> list[tuple[str, str]]:
    settings = plan.settings
    default = settings.index_url or default_index_url()
    urls = [("index:default", default)] if default else []
    urls += [(f"index:extra-{i}", u) for i, u in enumerate(settings.extra_index_urls, 1)]
    urls += [(f"find-links:{i}", u) for i, u in enumerate(settings.find_links, 1)]
    used = {s.index for s in plan.profile.stages if s.index}
    urls += [(f"index:{n}", u) for n in sorted(used) if (u := settings.url_of(n))]
    return urls


def _channel_urls(plan: Plan, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    if plan.backend != "conda":
        return []
    names = plan.channels
    urls = channel_urls(names, load_condarc(environ))  # honours channel_alias mirrors
    return [(f"channel:{name}", url) for name, url in zip(names, urls, strict=False)]


def plan_urls(plan: Plan, environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Every index, channel and git URL the plan will use, labelled by kind."""
    if plan.offline:
        return ()
    urls = [("git:verl", plan.source.repo), *_index_urls(plan), *_channel_urls(plan, environ)]
    return tuple(dict.fromkeys(urls))


def inputs_from_plan(
    plan: Plan, environ: Mapping[str, str] | None = None, settled: frozenset[str] = frozenset()
) -> DoctorInputs:
    """Doctor's inputs for a plan: its profile, variant, prefix, driver and URLs."""
    env = dict(os.environ if environ is None else environ)
    # verl's release sdist stands in for an unreachable git URL where the plan allows it.
    optional = frozenset({"git:verl"}) if plan.source.sdist_fallback else frozenset()
    builds, prebuilt = _routes(plan)
    return DoctorInputs(
        profile=plan.profile,
        variant=plan.variant,
        prefix=plan.prefix,
        python=plan.interpreter,
        backend=plan.backend,
        environ=env,
        urls=plan_urls(plan, env),
        optional_urls=optional,
        skip=frozenset(plan.skip_checks),
        settled=settled,
        driver=plan.driver,
        detect=False,  # the plan already read the driver; doctor judges the same one
        wheel_tags=_wheel_tags(plan),
        lock_platform=plan.locked.lock.platform if plan.locked else None,
        source_builds=builds,
        prebuilt_kernels=prebuilt,
        build_jobs=_build_jobs(plan, builds),
    )


def _build_jobs(plan: Plan, builds: tuple[tuple[str, str], ...]) -> tuple[tuple[str, int], ...]:
    """The MAX_JOBS each compiling step runs with, as the plan sized it (doctor's RAM check)."""
    wanted = {stage for stage, _ in builds}
    jobs = {s.id: s.env.get("MAX_JOBS", "") for s in plan.steps if s.id in wanted}
    return tuple((stage, int(value)) for stage, value in jobs.items() if value.isdigit())


def _routes(plan: Plan) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """((stage id, why it compiles), ...) and ((stage id, its prebuilt wheel's source), ...)."""
    builds, prebuilt = [], []
    for stage in plan.profile.stages:
        decision = plan.kernels.get(stage.id)
        choice = decision.choice if decision else None
        if stage.kind != "script" and decision is not None and not decision.compiles:
            prebuilt.append((stage.id, decision.choice.origin or decision.choice.source))
        elif stage.kind == "script" or choice is not None or stage.no_build_isolation:
            builds.append((stage.id, _why_it_compiles(stage.kind, decision)))
    return tuple(builds), tuple(prebuilt)


def _why_it_compiles(kind: str, decision: KernelDecision | None) -> str:
    if kind == "script":
        return "verl's install script compiles its kernels"
    if decision is None:
        return "built against the env's torch (no build isolation)"
    took = f" of about {decision.minutes:.0f} min on this host" if decision.minutes else ""
    if decision.choice.source == "stage":
        return f"installed as the stage says, compiled where no wheel fits: a source build{took}"
    return f"no prebuilt wheel for this env, so a source build{took}"


def _wheel_tags(plan: Plan) -> tuple[str, ...]:
    """The platform tags of the wheels a locked plan installs (an unlocked plan knows none yet)."""
    if plan.locked is None:
        return ()
    tags = set()
    for artifact in plan.locked.artifacts.values():
        if artifact.kind == "wheel":
            tags |= _platforms(artifact.filename)
    return tuple(sorted(tags))


def _platforms(wheel: str) -> set[str]:
    """The platform tags a wheel's name states (none for a name that is not a wheel's)."""
    try:
        return {t.platform for t in parse_wheel_filename(wheel)[3]}
    except InvalidWheelFilename:
        return set()


def run_preflight_checks(
    plan: Plan, environ: Mapping[str, str] | None = None, settled: frozenset[str] = frozenset()
) -> tuple[CheckResult, ...]:
    """Every preflight check's result for this plan; `settled`: its steps already done."""
    return run_doctor(inputs_from_plan(plan, environ, settled), only=PREFLIGHT_CHECKS).checks


def preflight_failures(
    plan: Plan, environ: Mapping[str, str] | None = None, settled: frozenset[str] = frozenset()
) -> tuple[CheckResult, ...]:
    """The preflight checks that fail for this plan (empty: the install may go ahead)."""
    checks = run_preflight_checks(plan, environ, settled)
    return tuple(c for c in checks if c.status.value == "fail")
