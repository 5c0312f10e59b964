"""Prove an env works: imports, versions, `uv pip check`, and the GPU smoke test, run in the env's
own interpreter (the verify step, `verify --prefix` and kernel stages use it)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.installer.envs.inventory import site_packages
from verl_bootstrap.paths import PROBES, checkout_dir
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.verify import bytecode
from verl_bootstrap.verify.backends import SINCE, backend_imports
from verl_bootstrap.verify.cudalibs import cuda_family
from verl_bootstrap.verify.depsfree import (
    DepsFree,
    Forced,
    Mismatch,
    deps_free,
    forced_keys,
    mismatches,
    unexplained,
)
from verl_bootstrap.verify.links import Gap, MissingLibrary, env_libraries, link_gaps

__all__ = [
    "Check",
    "VerifyReport",
    "links_check",
    "needs_driver",
    "needs_ffmpeg",
    "verify_env",
]

PROBE = PROBES / "verify_env.py"
_MARK = "@@VERIFY@@"
# Import errors that come from a missing NVIDIA driver, not from the env (the CUDA wheels install
# and import on a host with no GPU until something opens the driver).
_NEEDS_DRIVER = re.compile(
    r"libcuda|libnvidia|CUDA driver|NVIDIA driver|cuInit|no CUDA-capable device|Found no NVIDIA",
    re.IGNORECASE,
)


# torchcodec (verl-core's video decoder) loads FFmpeg's shared libraries, which a Python env does
# not carry: without them on the host every FFmpeg version's libavutil is missing (an ABI mismatch
# with torch says "undefined symbol" instead, and stays a failure).
_NEEDS_FFMPEG = re.compile(r"libav(util|codec|format)\.so\.\d+: cannot open shared object file")
_FFMPEG_HINT = (
    "skipped: needs FFmpeg's shared libraries (versions 4-8) on the host, which verl's video "
    "decoding loads: install ffmpeg (`conda install -c conda-forge ffmpeg` into the env, or the "
    "system's ffmpeg package)"
)


@dataclass(frozen=True)
class Check:
    """One verification: ok, fail, or skipped, with what was found."""

    name: str
    status: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifyReport:
    """All checks of one env."""

    prefix: str
    checks: tuple[Check, ...]
    bytecode: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No check failed."""
        return all(c.status != "fail" for c in self.checks)

    def failures(self) -> list[str]:
        """One line per failed check."""
        return [f"{c.name}: {c.detail}" for c in self.checks if c.status == "fail"]

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form."""
        return {
            "prefix": self.prefix,
            "ok": self.ok,
            "checks": [c.__dict__ for c in self.checks],
            "bytecode": self.bytecode,
        }


def verify_env(
    prefix: Path,
    spec: VerifySpec,
    *,
    log_path: Path | None = None,
    require_gpu: bool = False,
    gpu_present: bool = False,
    no_deps: tuple[tuple[str, str], ...] = (),
    forced: Sequence[Forced] = (),
) -> VerifyReport:
    """Run every check in the env's own interpreter. `no_deps`: (stage id, package) of the
    profile's stages that install without dependencies (as verl's deps-free installs, the
    mismatches `uv pip check` finds of them are expected); `forced`: the mismatches the env's
    lockfile records as forced by an override (`lock.io.recorded_forced`), expected too."""
    python = env_python(prefix)
    if not python.exists():
        raise InputError(f"{prefix} is not an env (no {python})")
    restored = bytecode.restore(python, prefix, log_path)
    answer = _probe(python, spec, gpu_present=gpu_present, log_path=log_path)
    imports = _import_checks(answer, gpu_present=gpu_present)
    checks = [*imports, *_version_checks(answer, spec)]
    free = deps_free(checkout_dir(prefix), no_deps)
    checks.append(_pip_check(python, log_path, spec.overridden, free, forced))
    checks.append(links_check(prefix))
    checks.append(_gpu_check(answer["gpu"], require_gpu=require_gpu))
    stored = {}
    if all(c.status != "fail" for c in imports):  # keep only what a working env compiled
        stored = bytecode.harvest(python, prefix, log_path)
    summary = bytecode.summary(restored, stored)
    return VerifyReport(prefix=str(prefix), checks=tuple(checks), bytecode=summary)


def _probe(
    python: Path, spec: VerifySpec, *, gpu_present: bool, log_path: Path | None
) -> dict[str, Any]:
    request = {
        "imports": list(spec.imports),
        "versions": sorted(spec.versions),
        "gpu_smoke": spec.gpu_smoke,
        "gpu_present": gpu_present,
        "bf16": spec.bf16,
        "flash_attn": spec.flash_attn,
        "backend": {"since": SINCE, "imports": list(backend_imports(spec.imports))},
    }
    env: dict[str, str | None] = {"PYTHONNOUSERSITE": "1", "PYTHONWARNINGS": "ignore"}
    env.update(bytecode.compiling_environment())  # its imports fill the store
    done = proc.run(
        [str(python), str(PROBE), json.dumps(request)],
        log_path=log_path,
        env=env,
        check=False,
        keep_output=True,
    )
    result: dict[str, Any] | None = proc.marked(done.output, _MARK)
    if result is not None:
        return result
    raise InputError(f"the verify probe did not answer in {python} (exit {done.returncode})")


def needs_driver(error: str, *, triton_stub: bool = False) -> bool:
    """An import error that comes from the missing NVIDIA driver, not from a broken env (a kernel
    stage's import check asks too)."""
    return bool(_NEEDS_DRIVER.search(error)) or (triton_stub and "triton" in error)


def needs_ffmpeg(error: str) -> bool:
    """An import error that only the host's missing FFmpeg libraries explain (torchcodec)."""
    return bool(_NEEDS_FFMPEG.search(error)) and "undefined symbol" not in error


def _import_checks(answer: dict[str, Any], *, gpu_present: bool) -> list[Check]:
    items = [*answer["imports"], *answer.get("backend", [])]
    return [_import_check(item, gpu_present=gpu_present) for item in items]


def _import_check(item: dict[str, Any], *, gpu_present: bool) -> Check:
    name = f"import {item['module']}"
    if item.get("skipped"):  # a backend's module of a later verl than the env's
        return Check(name=name, status="skipped", detail=f"skipped: {item['skipped']}")
    if item["ok"]:
        return Check(name=name, status="ok", detail=item.get("file") or "")
    error = item["error"]
    if needs_ffmpeg(error):  # a host library, like the driver: named, not a broken env
        return Check(name=name, status="skipped", detail=_FFMPEG_HINT)
    if not gpu_present and needs_driver(error, triton_stub=item.get("triton_stub", False)):
        # an env prepared for a GPU host (`--cuda cuXYZ` here): this import can only run there
        last = error.strip().splitlines()[-1] if error.strip() else error
        detail = f"skipped: needs the NVIDIA driver ({last})"
        return Check(name=name, status="skipped", detail=detail)
    return Check(name=name, status="fail", detail=error)


def _version_checks(answer: dict[str, Any], spec: VerifySpec) -> list[Check]:
    checks = []
    for name, wanted in sorted(spec.versions.items()):
        have = answer["versions"].get(name)
        ok = have is not None and have in SpecifierSet(wanted, prereleases=True)
        detail = f"{name} {have} (profile wants {wanted})" if have else f"{name} not installed"
        checks.append(Check(name=f"version {name}", status="ok" if ok else "fail", detail=detail))
    return checks


def _pip_check(
    python: Path,
    log_path: Path | None,
    overridden: tuple[str, ...] = (),
    free: Mapping[str, DepsFree] | None = None,
    forced: Sequence[Forced] = (),
) -> Check:
    done = proc.run(
        [uv_binary(), "pip", "check", "--python", str(python)],
        log_path=log_path,
        check=False,
        keep_output=True,
    )
    lines = [ln for ln in done.output.splitlines() if ln.strip()]
    if done.returncode == 0:
        return Check(name="uv pip check", status="ok", detail=lines[-1] if lines else "")
    found = mismatches(done.output)
    free = free or {}
    left = unexplained(found, free, overridden, forced)
    if not found or left:  # named: those nothing on purpose explains
        detail = "; ".join(m.line for m in left) or (lines[-1] if lines else "")
        return Check(name="uv pip check", status="fail", detail=detail)
    # each mismatch is one made on purpose: an override in the profile's stages, one the lock
    # records as forced by an override, or a distribution installed without its own
    # dependencies (verl's dependency-metadata, no_deps)
    return Check(name="uv pip check", status="warn", detail=_expected(found, free, forced))


def _expected(found: list[Mismatch], free: Mapping[str, DepsFree], forced: Sequence[Forced]) -> str:
    """What explains each mismatch: the deps-free installs, by who says so, the forced ones the
    lock records, by name, then the profile's overrides."""
    deps_free = sorted({m.package for m in found if m.package in free})
    said = [f"{n} ({free[n].said_by})" for n in deps_free]
    keys = {(m.package, m.wanted) for m in found}
    named = [f.line() for f in forced if (f.required_by, f.package) in keys]
    recorded = forced_keys(forced)
    overrides = sorted(
        {m.wanted for m in found if m.package not in free and (m.package, m.wanted) not in recorded}
    )
    parts = [f"installed without their own dependencies: {', '.join(said)}"] if said else []
    if named:
        parts.append(f"mismatches the lock records as forced by an override ({'; '.join(named)})")
    if overrides:
        parts.append(f"the profile's overrides of {', '.join(overrides)}")
    lines = "; ".join(m.line for m in found)
    return f"expected, only {' and '.join(parts)}: {lines}"


def links_check(prefix: Path) -> Check:
    """Every native library the env's wheels installed finds each CUDA library it needs among
    them, and each versioned symbol it takes from another of them (read from the files: no GPU,
    no import needed). In an env with no CUDA library at all (a CPU env), a wheel that needs
    them is another build than the env's: a named warning, not a broken env."""
    libraries = env_libraries(site_packages(prefix))
    gaps = link_gaps(libraries, among="the env")
    lines = [g.line() for g in gaps]
    data = {"libraries": len(libraries), "gaps": lines}
    # a CUDA build may bundle one CUDA library of its own (torchcodec's libnvjpeg) and still
    # miss the rest: that copy does not make the env a GPU env
    lacking = {g.library.owner for g in gaps if isinstance(g, MissingLibrary)}
    cpu_env = not any(cuda_family(lib.name) and lib.owner not in lacking for lib in libraries)
    broken = [g for g in gaps if not (cpu_env and isinstance(g, MissingLibrary))]
    if broken:
        detail = "; ".join(g.line() for g in broken)
        return Check(name="native links", status="fail", detail=detail, data=data)
    if gaps:  # each a CUDA build of a package in a CPU env: it cannot load here
        return Check(name="native links", status="warn", detail=_cuda_builds(gaps), data=data)
    detail = (
        f"{len(libraries)} shared libraries: each CUDA library one needs is there, and each "
        "versioned symbol one takes from another is defined there"
    )
    return Check(name="native links", status="ok", detail=detail, data=data)


def _cuda_builds(gaps: list[Gap]) -> str:
    """The packages a CPU env holds as CUDA builds, and where their CPU builds come from."""
    owners = sorted({g.library.owner for g in gaps})
    needed = sorted({n for g in gaps if isinstance(g, MissingLibrary) for n in g.needed})
    return (
        f"{', '.join(owners)}: a CUDA build in a CPU env (its libraries need "
        f"{', '.join(needed)}, which a CPU env does not have), so it cannot load here; the rest "
        "of the env does not need it. Its CPU build comes from the PyTorch CPU index: name that "
        "index (or a mirror of it) `pytorch-cpu` (--index pytorch-cpu=URL, or the site config) "
        "and re-run the install"
    )


def _gpu_check(gpu: dict[str, Any], *, require_gpu: bool) -> Check:
    status = gpu["status"]
    if status == "skipped" and require_gpu:
        status = "fail"
    detail = gpu["detail"] if isinstance(gpu["detail"], str) else json.dumps(gpu["detail"])
    data = {k: v for k, v in gpu.items() if k not in ("status", "detail")}
    return Check(name="gpu smoke test", status=status, detail=detail, data=data)
