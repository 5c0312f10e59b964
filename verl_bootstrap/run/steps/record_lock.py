"""Step `record-lock`: write what each stage installed into the env's own lockfile."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from packaging.utils import canonicalize_name
from pydantic import ValidationError

from verl_bootstrap import __version__, proc
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.installer.envs.inventory import Dist, installed
from verl_bootstrap.lock.format import (
    CondaPackage,
    CudaTarget,
    KernelWheel,
    LockedDist,
    LockedStage,
    Lockfile,
    channel_name,
)
from verl_bootstrap.lock.installing.lockedsteps import record_locked_env
from verl_bootstrap.lock.io import write_lockfile
from verl_bootstrap.lock.lockcheckout import locked_source
from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.plan.graph import Plan, Step
from verl_bootstrap.plan.stepcontract import (
    RecordLockInputs,
    RecordLockOutputs,
    SourceOutputs,
    StageOutputs,
)
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.run.steps.stepcontext import StepContext
from verl_bootstrap.safety import jsontext
from verl_bootstrap.source.spec import SourceResult

__all__ = ["describe", "execute", "kernel_wheels", "write_env_lock"]


def write_env_lock(
    plan: Plan, source: SourceResult, *, snapshots: Mapping[str, Mapping[str, object]]
) -> Path:
    """Write the env's lockfile from the stages' snapshots (each stage: what it added or changed).

    `snapshots` holds each finished step's outputs; a stage's "installed" is the env as it left it.
    """
    now = installed(plan.prefix)
    stages = [_verl_stage(now)]
    seen = {d.name: d.version for s in stages for d in s.distributions}
    wheels = kernel_wheels(plan, snapshots)
    for stage in plan.stages:
        snapshot = _stage_snapshot(StageOutputs.read(snapshots.get(stage.id)), now)
        added = {n: v for n, v in snapshot.items() if seen.get(n) != v}
        seen.update(added)
        dists = tuple(
            LockedDist(
                name=n, version=v, kernel_wheel=wheels.get(n), record_sha256=_digest(now, n, v)
            )
            for n, v in sorted(added.items())
        )
        stages.append(
            LockedStage(id=stage.id, kind=stage.kind, env=dict(stage.env), distributions=dists)
        )
    lock = Lockfile(
        generated_by=f"verl-bootstrap {__version__}",
        regenerate=f"verl-bootstrap --profile {plan.profile.name} --prefix {plan.prefix}",
        profile=plan.profile.name,
        profile_hash=plan.profile_hash,
        verl=locked_source(source),
        python=_python_version(plan.prefix),
        platform=host_platform(),
        cuda=CudaTarget(variant=plan.variant, cuda=plan.profile.cuda_variants[plan.variant].cuda),
        backend=plan.backend,
        conda=conda_packages(plan.prefix),
        stages=tuple(stages),
        skipped_checks=plan.skip_checks,
        allow_unsupported_ref=plan.allow_unsupported_ref,
        uv_lock=plan.uv_lock,  # recorded as `lock` records it: its checks replay the same stack
    )
    return write_lockfile(lock, env_lockfile(plan.prefix))


def kernel_wheels(
    plan: Plan, outputs: Mapping[str, Mapping[str, object]]
) -> dict[str, KernelWheel]:
    """distribution -> the wheel its kernel stage installed (prebuilt or built here), from the
    stages' outputs; a stage whose outputs do not name a whole key records none."""
    out: dict[str, KernelWheel] = {}
    for stage in plan.stages:
        done = StageOutputs.read(outputs.get(stage.id)).kernel
        if stage.kernel is None or not isinstance(done, Mapping) or "sha256" not in done:
            continue
        names = {
            "file": "wheel",
            "sha256": "sha256",
            "source": "source",
            "key": "key",
            "url": "url",
            "origin": "origin",
            "trust": "trust",
        }
        body = {field: done.get(name) for field, name in names.items()}
        try:
            dist = done.get("distribution") or stage.kernel.distribution
            out[canonicalize_name(str(dist))] = KernelWheel.model_validate(body)
        except ValidationError:
            continue
    return out


def replaced_parts(outputs: Mapping[str, Mapping[str, object]]) -> dict[str, str]:
    """locked part -> the distribution whose whole kernel wheel holds it and was installed in
    its place (a --locked kernel stage's outputs)."""
    out = {}
    for step in outputs.values():
        done = StageOutputs.read(step).kernel
        if isinstance(done, Mapping) and isinstance(done.get("distribution"), str):
            for name in done.get("replaces") or ():
                out[str(name)] = done["distribution"]
    return out


def _digest(now: Mapping[str, Dist], name: str, version: str) -> str | None:
    """The digest of the installed RECORD, when the env still has the version the stage left
    (a re-run compares it, to tell files replaced since)."""
    dist = now.get(name)
    return dist.record_sha256 if dist is not None and dist.version == version else None


def _verl_stage(now: Mapping[str, object]) -> LockedStage:
    verl = now.get("verl")
    dists = (LockedDist(name="verl", version=verl.version),) if verl is not None else ()  # type: ignore[attr-defined]
    return LockedStage(
        id="install-verl", kind="install-verl", options=("--no-deps", "-e"), distributions=dists
    )


def _stage_snapshot(outputs: StageOutputs, now: Mapping[str, object]) -> dict[str, str]:
    """The env as that stage left it (from its recorded outputs), else as it is now."""
    recorded = outputs.installed
    if isinstance(recorded, Mapping):
        return {canonicalize_name(k): str(v) for k, v in recorded.items()}
    return {n: d.version for n, d in now.items()}  # type: ignore[attr-defined]


def conda_packages(prefix: Path) -> tuple[CondaPackage, ...]:
    """The conda packages of a conda prefix, from its conda-meta records."""
    records = []
    for meta in sorted((prefix / "conda-meta").glob("*.json")):
        data = jsontext.loads(meta.read_text(encoding="utf-8"))
        records.append(
            CondaPackage(
                name=data["name"],
                version=data["version"],
                build=data.get("build", ""),
                channel=channel_name(data.get("channel", "")),
                subdir=data.get("subdir", ""),
                filename=data.get("fn", ""),
                md5=data.get("md5"),
                sha256=data.get("sha256"),
            )
        )
    return tuple(records)


def _python_version(prefix: Path) -> str:
    out = proc.capture(
        [str(env_python(prefix)), "-c", "import platform; print(platform.python_version())"],
        timeout=60,
    )
    return out.stdout.strip()


def describe(plan: Plan, previous: str) -> Step:
    return Step(
        id="record-lock",
        kind="record-lock",
        deps=(previous,),
        description="record what was installed into the env's lockfile",
        commands=((f"write {env_lockfile(plan.prefix)}",),),
        inputs=RecordLockInputs(variant=plan.variant, profile=plan.profile.name),
    )


def execute(ctx: StepContext) -> RecordLockOutputs:
    built = {
        name: digest
        for outputs in ctx.prior.values()
        for name, digest in StageOutputs.read(outputs).built.items()
    }
    kernels = kernel_wheels(ctx.plan, ctx.prior)
    # --locked: the env's record is the lockfile it was installed from
    recorded = record_locked_env(
        ctx.plan.prefix, ctx.plan.lockfile, built, kernels, replaced_parts(ctx.prior)
    )
    if recorded is not None:
        return RecordLockOutputs(lockfile=str(recorded))
    source = SourceOutputs.read(ctx.prior["fetch-source"]).result()
    path = write_env_lock(ctx.plan, source, snapshots=ctx.prior)
    return RecordLockOutputs(lockfile=str(path))
