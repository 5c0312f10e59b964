"""Library shadowing: foreign cuDNN/NCCL/cuBLAS/cudart on the load path, and what torch loads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verl_bootstrap.machine.gpu.shadow import ForeignLib, LoadedLib, find_foreign_libs, loaded_libs
from verl_bootstrap.plan.doctor.inputs import PROBE_LIBS, Context, EnvFacts
from verl_bootstrap.plan.doctor.results import CheckResult, fail, ok, skipped, warn

__all__ = ["check_shadowing_loaded", "check_shadowing_paths"]

_WATCHED = "cuDNN, NCCL, cuBLAS or the CUDA runtime"
_AFTER = "after the install, `verl-bootstrap doctor --prefix PREFIX` shows the files really loaded"


def _by_folder(libs: Sequence[ForeignLib]) -> dict[tuple[Path, str], list[str]]:
    grouped: dict[tuple[Path, str], list[str]] = {}
    for lib in libs:
        grouped.setdefault((lib.path.parent, lib.origin), []).append(lib.path.name)
    return grouped


def _describe(libs: Sequence[ForeignLib]) -> str:
    return "; ".join(
        f"{', '.join(names)} in {folder} ({origin})"
        for (folder, origin), names in _by_folder(libs).items()
    )


def _path_fix(libs: Sequence[ForeignLib]) -> str:
    env_dirs = sorted({str(x.path.parent) for x in libs if x.origin == "LD_LIBRARY_PATH"})
    conf = sorted({x.origin for x in libs if x.origin != "LD_LIBRARY_PATH"})
    fixes = []
    if env_dirs:
        fixes.append(
            f"keep {', '.join(env_dirs)} off LD_LIBRARY_PATH when using the env (its activation "
            "does this; torch's wheels bring their own copies)"
        )
    if conf:
        fixes.append(
            f"{', '.join(conf)} put folders on the system load path (an administrator's setting); "
            f"torch's wheels normally load their own copies first, and {_AFTER}"
        )
    return "; ".join(fixes)


def check_shadowing_paths(ctx: Context) -> CheckResult:
    """Foreign CUDA libraries where the loader searches (or toolkits live), before an install."""
    libs = find_foreign_libs(root=ctx.inputs.root, environ=ctx.environ)
    data = {"libraries": [{"path": str(x.path), "origin": x.origin} for x in libs]}
    on_path = [x for x in libs if x.on_load_path]
    if on_path:
        return warn("shadowing-paths", _describe(on_path), _path_fix(on_path), **data)
    if libs:
        found = f"{_describe(libs)}: not on the load path, so they cannot shadow the env's copies"
        return ok("shadowing-paths", found, **data)
    where = "LD_LIBRARY_PATH, ld.so.conf.d, CUDA_HOME or CUDNN_HOME"
    return ok("shadowing-paths", f"no {_WATCHED} in {where}", **data)


def _loaded(env: EnvFacts, probe: Mapping[str, Any]) -> list[LoadedLib]:
    maps = probe.get("maps") or []
    return loaded_libs((str(p) for p in maps), env.prefix)


def _loaded_data(loaded: Sequence[LoadedLib], probe: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "loaded": [
            {"name": x.name, "path": str(x.path), "inside_prefix": x.inside_prefix} for x in loaded
        ],
        "torch": probe.get("torch"),
        "transformer_engine": probe.get("transformer_engine"),
        "touched": probe.get("touched"),
    }


def _touch_errors(probe: Mapping[str, Any]) -> list[str]:
    errors = [f"torch does not import: {probe['torch']['error']}"] if _torch_broken(probe) else []
    engine = probe.get("transformer_engine") or {}
    if engine.get("error"):
        errors.append(f"TransformerEngine does not import: {engine['error']}")
    touched = probe.get("touched") or {}
    if touched.get("cudnn") not in (None, "ok"):
        errors.append(f"cuDNN failed a first convolution: {touched['cudnn']}")
    if isinstance(touched.get("nccl"), str):
        errors.append(f"NCCL does not answer: {touched['nccl']}")
    return errors


def _torch_broken(probe: Mapping[str, Any]) -> bool:
    error = str((probe.get("torch") or {}).get("error") or "")
    return bool(error) and not error.startswith("ModuleNotFoundError")


def _foreign_fail(env: EnvFacts, foreign: Sequence[LoadedLib], data: dict[str, Any]) -> CheckResult:
    places = "; ".join(f"{x.name} from {x.path}" for x in foreign)
    folders = ", ".join(sorted({str(x.path.parent) for x in foreign}))
    return fail(
        "shadowing-loaded",
        f"loaded from outside {env.prefix}: {places}",
        f"keep {folders} off the load path: use the env's activation, which drops them from "
        "LD_LIBRARY_PATH (or unset LD_LIBRARY_PATH and LD_PRELOAD before running)",
        **data,
    )


def _env_or_skip(ctx: Context) -> EnvFacts | CheckResult:
    env = ctx.env
    if env is None:
        return skipped("shadowing-loaded", "no env to look inside (pass --prefix or --python)")
    if not env.exists:
        return skipped("shadowing-loaded", f"no env at {env.prefix} yet", prefix=str(env.prefix))
    return env


def _ok_finding(env: EnvFacts, loaded: Sequence[LoadedLib], probe: Mapping[str, Any]) -> str:
    torch = probe.get("torch") or {}
    head = f"torch {torch.get('version')} (CUDA {torch.get('cuda')}, cuDNN {torch.get('cudnn')})"
    names = ", ".join(x.name for x in loaded) or "no CUDA library"
    touched = "cuDNN and NCCL touched on the GPU" if probe.get("touched") else "no GPU to touch"
    return f"{head} loads {names}, all from inside {env.prefix}; {touched}"


def check_shadowing_loaded(ctx: Context) -> CheckResult:
    """In the env's interpreter: import torch, touch cuDNN/NCCL, and see where each came from."""
    env = _env_or_skip(ctx)
    if isinstance(env, CheckResult):
        return env
    if env.probe is None:
        return fail(
            "shadowing-loaded",
            f"the library probe failed in {env.python}: {env.probe_error}",
            f"run `{env.python} {PROBE_LIBS}` to see the whole error",
        )
    loaded = _loaded(env, env.probe)
    data = _loaded_data(loaded, env.probe)
    foreign = [x for x in loaded if not x.inside_prefix]
    if foreign:
        return _foreign_fail(env, foreign, data)
    errors = _touch_errors(env.probe)
    if errors:
        fix = "reinstall the env's CUDA packages (re-run verl-bootstrap for this prefix); " + _AFTER
        return fail("shadowing-loaded", "; ".join(errors), fix, **data)
    if (env.probe.get("torch") or {}).get("error"):
        return warn(
            "shadowing-loaded",
            f"torch is not installed in {env.prefix}: nothing loads CUDA libraries",
            "install a profile into this prefix: verl-bootstrap --profile NAME --prefix PREFIX",
            **data,
        )
    return ok("shadowing-loaded", _ok_finding(env, loaded, env.probe), **data)
