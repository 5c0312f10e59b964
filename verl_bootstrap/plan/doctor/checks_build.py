"""Checks of the interpreter and, for stages that compile, the build tools."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from verl_bootstrap import proc
from verl_bootstrap.kernels.toolkit import Nvcc, find_nvcc, toolkit_fix, toolkit_problem
from verl_bootstrap.plan.doctor.checks_machine import planned_builds
from verl_bootstrap.plan.doctor.inputs import Context, exact_env
from verl_bootstrap.plan.doctor.results import CheckResult, fail, ok, skipped
from verl_bootstrap.profile.variants import variant_window

__all__ = ["check_build_tools", "check_python"]

_TIMEOUT = 15.0
_ASK = (
    "import sys, sysconfig; print('%d.%d.%d' % sys.version_info[:3]); "
    "print(sysconfig.get_paths()['include'])"
)


@dataclass(frozen=True)
class Interpreter:
    """A Python interpreter's version and its headers folder."""

    path: str
    version: str
    include: Path


def _target_python(ctx: Context) -> Path | None:
    """The env's interpreter when the env exists, else the one a new venv is made from."""
    if ctx.env is not None and ctx.env.exists:
        return ctx.env.python
    return ctx.inputs.python


def _ask(python: Path, environ: Mapping[str, str]) -> Interpreter | None:
    try:
        done = proc.capture([str(python), "-c", _ASK], env=exact_env(environ), timeout=_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) < 2:
        return None
    return Interpreter(str(python), lines[0].strip(), Path(lines[1].strip()))


def _host() -> Interpreter:
    version = ".".join(str(n) for n in sys.version_info[:3])
    return Interpreter(sys.executable, version, Path(sysconfig.get_paths()["include"]))


def _interpreter(ctx: Context) -> Interpreter | None:
    target = _target_python(ctx)
    return _ask(target, ctx.environ) if target is not None else _host()


def check_python(ctx: Context) -> CheckResult:
    """The env's interpreter (or the one a venv would be made from) against the profile's range."""
    profile = ctx.profile
    if profile is None:
        return skipped("python", "no profile, so no Python range to check")
    wanted = SpecifierSet(profile.python.requires)
    target = _target_python(ctx)
    if target is None and profile.env.backend == "conda":
        prefer = profile.python.prefer
        chosen = {"backend": "conda", "prefer": prefer, "requires": str(wanted)}
        if Version(prefer) in wanted:
            gets = f"the conda env will get Python {prefer}, within {wanted}"
            return ok("python", gets, **chosen)
        fix = f"set python.prefer in profile {profile.name!r} to a version within {wanted}"
        return fail("python", f"python.prefer {prefer} is outside {wanted}", fix, **chosen)
    found = _interpreter(ctx)
    if found is None:
        return fail("python", f"{target} does not run", "pass --python a working interpreter")
    data = {"python": found.path, "version": found.version, "requires": str(wanted)}
    if Version(found.version) in wanted:
        return ok("python", f"Python {found.version} ({found.path}) is within {wanted}", **data)
    fix = (
        f"use a Python within {wanted}: `uv python install {profile.python.prefer}` needs no "
        "root, or use the conda backend, which brings its own Python"
    )
    return fail("python", f"Python {found.version} ({found.path}) is outside {wanted}", fix, **data)


def _cuda_problem(ctx: Context, nvcc: Nvcc | None) -> tuple[str, str] | None:
    """(finding, fix) when the wheels' CUDA needs a toolkit that is missing or of another major."""
    profile, variant = ctx.profile, ctx.inputs.variant
    if profile is None or variant in (None, "cpu") or variant not in profile.cuda_variants:
        return None
    cuda = variant_window(variant, profile.cuda_variants[variant]).cuda or "12.8"
    problem = toolkit_problem(cuda, nvcc)
    return (problem, toolkit_fix(cuda)) if problem else None


def _build_problems(ctx: Context) -> tuple[list[str], list[str], dict[str, object]]:
    nvcc = find_nvcc(ctx.environ)
    python = _interpreter(ctx)
    cxx = shutil.which("c++", path=ctx.environ.get("PATH")) or shutil.which(
        "g++", path=ctx.environ.get("PATH")
    )
    problems, fixes = [], []
    cuda = _cuda_problem(ctx, nvcc)
    if cuda:
        problems.append(cuda[0])
        fixes.append(cuda[1])
    if python is None or not (python.include / "Python.h").exists():
        problems.append("no Python.h for the env's interpreter")
        fixes.append("use an interpreter with headers (conda's python, or `uv python install`)")
    if cxx is None:
        problems.append("no C++ compiler (c++ or g++) on PATH")
        fixes.append("load one (`module load gcc`) or add conda's gxx_linux-64 to the env")
    data: dict[str, object] = {
        "nvcc": nvcc.path if nvcc else None,
        "nvcc_cuda": nvcc.release if nvcc else None,
        "cxx": cxx,
    }
    return problems, fixes, data


def check_build_tools(ctx: Context) -> CheckResult:
    """nvcc, Python headers and a C++ compiler, where the plan builds a stage from source (a
    kernel stage that takes a prebuilt wheel needs none of them)."""
    builds = planned_builds(ctx)
    if not builds:
        return _no_build(ctx)
    problems, fixes, data = _build_problems(ctx)
    data["stages"] = list(builds)
    needed = "; ".join(f"{stage}: {why}" for stage, why in builds.items())
    if problems:
        fixes += [_WHEELHOUSE] if _kernel_builds(ctx, builds) else []
        return fail(
            "build-tools", f"{'; '.join(problems)} (for {needed})", "; ".join(fixes), **data
        )
    found = f"nvcc {data['nvcc_cuda']}" if data["nvcc"] else "no CUDA build needed"
    return ok("build-tools", f"{found}, Python.h and {data['cxx']} for {needed}", **data)


# what spares every later node a kernel's source build (docs/kernels.md, The lab wheelhouse)
_WHEELHOUSE = (
    "or take the wheel from a lab wheelhouse (`wheelhouse:` in the site config) where one node "
    "built it or `verl-bootstrap wheelhouse add` filed it: every later node then installs it "
    "prebuilt, with no toolkit and no build"
)


def _kernel_builds(ctx: Context, builds: Mapping[str, str]) -> list[str]:
    """The kernel stages among the stages that compile (a lab wheelhouse can serve their wheel)."""
    stages = ctx.profile.stages if ctx.profile else ()
    return [s.id for s in stages if s.kernel is not None and s.id in builds]


def _no_build(ctx: Context) -> CheckResult:
    """No stage compiles: say which kernels come prebuilt, and when a toolkit is asked for."""
    prebuilt = dict(ctx.inputs.prebuilt_kernels)
    if not prebuilt:
        return skipped("build-tools", "no stage builds from source")
    taken = ", ".join(
        f"{stage} takes a prebuilt wheel ({source})" for stage, source in prebuilt.items()
    )
    return ok(
        "build-tools",
        f"no CUDA toolkit needed: {taken}; a kernel stage that falls back to a source build "
        "checks for nvcc when it does",
        prebuilt=prebuilt,
    )
