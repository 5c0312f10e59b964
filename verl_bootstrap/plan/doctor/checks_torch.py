"""A CPU variant gets a CPU torch: never the default index's CUDA build (GBs of CUDA libraries).

The CPU builds come from the profile's CPU index (optional: a plan drops it when it does not
answer) or the user's own indexes and find-links. When it was dropped, the torch the stage would
install is resolved first (`uv pip compile --no-deps`: metadata only, nothing downloaded); a
torch that is no `+cpu` build refuses the install, naming the index to configure.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from verl_bootstrap import proc
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.machine.host.netfaults import net_fault, without_tool_hints
from verl_bootstrap.plan.doctor.inputs import Context
from verl_bootstrap.plan.doctor.results import CheckResult, fail, ok, skipped
from verl_bootstrap.profile.models import Stage
from verl_bootstrap.redact import redact

__all__ = ["check_cpu_torch"]

NAME = "cpu-torch"
_RESOLVE_TIMEOUT = 120.0


def check_cpu_torch(ctx: Context) -> CheckResult:
    """A CPU variant's torch, in the env or about to be installed, is a CPU build."""
    profile, variant = ctx.profile, ctx.inputs.variant
    if sys.platform != "linux" or profile is None or variant not in profile.cuda_variants:
        return skipped(NAME, "no CPU variant planned on Linux")
    if profile.cuda_variants[variant].cuda is not None:
        return skipped(NAME, f"variant {variant} is a CUDA one")
    have = _env_torch(ctx)
    if have is not None:
        return _judged(have, f"the env holds torch {have}")
    stage = _torch_stage(ctx)
    if stage is None:
        return skipped(NAME, "no torch stage left to run, or its CPU index is in use")
    return _resolved(ctx, stage)


def _env_torch(ctx: Context) -> str | None:
    """The torch the env already holds, when doctor looks at an existing env."""
    prefix = ctx.inputs.prefix
    if prefix is None or ctx.inputs.settled or not (prefix / "bin" / "python").exists():
        return None
    dist = installed(prefix).get("torch")
    return dist.version if dist is not None else None


def _torch_stage(ctx: Context) -> Stage | None:
    """The first stage still to run that installs torch from an index the plan dropped (the
    profile's optional CPU index, unreachable); a locked plan installs the lockfile's torch."""
    profile = ctx.profile
    if profile is None or ctx.inputs.lock_platform is not None or not ctx.inputs.urls:
        return None
    labels = {label for label, _ in ctx.inputs.urls}
    for stage in profile.stages:
        dropped = stage.index and f"index:{stage.index}" not in labels
        if dropped and stage.id not in ctx.inputs.settled and _torch_pin(stage):
            return stage
    return None


def _torch_pin(stage: Stage) -> str | None:
    for spec in stage.packages:
        try:
            if Requirement(spec).name.lower() == "torch":
                return spec
        except InvalidRequirement:
            continue
    return None


def _resolved(ctx: Context, stage: Stage) -> CheckResult:
    pin = _torch_pin(stage) or "torch"
    version, error = _resolve(ctx, pin)
    # what a script reads: the pin, the version the other indexes give, the CPU index gone without
    data = {"pin": pin, "resolved": version, "cpu_index": stage.index}
    fault = net_fault(error) if version is None else None
    if fault is not None:  # the indexes it asked failed, not the CPU index it went without
        return fail(NAME, f"{pin} could not be looked up: {fault.line()}", fault.fix(), **data)
    if version is None:
        return fail(
            NAME,
            f"{pin} could not be resolved without {_index(ctx, stage)}: {error.splitlines()[-1]}",
            _fix(ctx, stage, pin),
            **data,
        )
    if _is_cpu(version):
        found = f"{pin} resolves to the CPU build {version} ({_index(ctx, stage)} unused)"
        return ok(NAME, found, **data)
    return fail(
        NAME,
        f"the cpu variant needs a CPU build of {pin}, and none is reachable: "
        f"{_index(ctx, stage)} does not answer, and the default index and your indexes and "
        f"find-links offer torch {version}, a CUDA build (GBs of CUDA libraries)",
        _fix(ctx, stage, pin),
        **data,
    )


def _judged(version: str, found: str) -> CheckResult:
    if _is_cpu(version):
        return ok(NAME, f"{found}, a CPU build")
    return fail(
        NAME,
        f"{found}, a CUDA build, in an env of a CPU variant",
        "remove the env and install it again with the CPU index reachable "
        "(--index NAME=URL names a mirror of it)",
    )


def _is_cpu(version: str) -> bool:
    try:
        local = Version(version).local or ""
    except InvalidVersion:
        return False
    return local.split(".")[0] == "cpu"


def _index(ctx: Context, stage: Stage) -> str:
    spec = ctx.profile.indexes.get(stage.index or "") if ctx.profile else None
    url = f" ({redact(spec.url)})" if spec is not None else ""
    return f"index {stage.index!r}{url}"


def _fix(ctx: Context, stage: Stage, pin: str) -> str:
    return (
        f"configure the CPU index: --index {stage.index}=URL (a mirror of it), or an index named "
        f"{stage.index!r} in your site config, or a find-links folder holding the "
        f"{pin.replace('==', '-')}+cpu wheel"
    )


def _resolve(ctx: Context, pin: str) -> tuple[str | None, str]:
    """The torch version uv picks for `pin` from the plan's other indexes (no download)."""
    argv = [uv_binary(), "pip", "compile", "--no-deps", "--no-header", "--quiet"]
    argv += ["--index-strategy", "unsafe-best-match", "--no-sources"]
    argv += _python_args(ctx) + _source_args(ctx)
    with tempfile.TemporaryDirectory(prefix="vb-cpu-torch-") as work:
        wanted = Path(work) / "torch.in"
        wanted.write_text(pin + "\n", encoding="utf-8")
        done = proc.capture([*argv, str(wanted)], timeout=_RESOLVE_TIMEOUT)
    for line in done.stdout.splitlines():
        if line.lower().startswith("torch=="):
            return line.split("==", 1)[1].strip(), ""
    said = [line for line in without_tool_hints(done.stderr.strip().splitlines()) if line.strip()]
    return None, "\n".join(said) or "no answer"


def _python_args(ctx: Context) -> list[str]:
    python = ctx.inputs.python
    if python is not None and python.exists():
        return ["--python", str(python)]
    prefer = ctx.profile.python.prefer if ctx.profile else None
    return ["--python-version", prefer] if prefer else []


def _source_args(ctx: Context) -> list[str]:
    """The plan's default index, its other indexes and find-links, as the install uses them."""
    args = ["--no-index"]
    for label, url in ctx.inputs.urls:
        if label == "index:default":
            args = [a for a in args if a != "--no-index"] + ["--default-index", url]
        elif label.startswith("index:"):
            args += ["--extra-index-url", url]
        elif label.startswith("find-links:"):
            args += ["--find-links", url]
    return args
