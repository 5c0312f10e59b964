"""Checks of the driver and GPUs: the driver itself, driver vs plan, GPU vs build, visibility."""

from __future__ import annotations

import dataclasses

from verl_bootstrap.machine.gpu.cuda import (
    arch_supported,
    driver_serves,
    planned_arch_list,
    supports_bf16,
    version_tuple,
)
from verl_bootstrap.machine.gpu.detect import CONDA_OVERRIDE, DRIVER_OVERRIDE
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo, GpuInfo
from verl_bootstrap.machine.gpu.visible import parse_visible_devices, ray_note
from verl_bootstrap.plan.doctor.inputs import Context
from verl_bootstrap.plan.doctor.results import CheckResult, fail, ok, skipped, warn
from verl_bootstrap.profile.variants import VariantWindow, variant_window

__all__ = ["check_driver", "check_driver_vs_plan", "check_gpu_vs_build", "check_visibility"]

NO_DRIVER = "no NVIDIA driver"
_NO_DRIVER_DETAIL = (
    f"{NO_DRIVER} (NVML, /proc/driver/nvidia/version and nvidia-smi are all absent; a CUDA "
    "toolkit's nvcc says nothing about the driver)"
)
_BF16_GPUS = "A100, A10, L4, L40S, H100, H200, B200 or an RTX 30xx or newer"


def _gpu_line(gpu: GpuInfo) -> str:
    parts = [f"GPU {gpu.index}: {gpu.name}"]
    if gpu.memory_mib is not None:
        parts.append(f"{gpu.memory_mib / 1024:.0f} GiB")
    parts.append(f"cc {gpu.compute_capability or 'unknown'}")
    if gpu.mig:
        parts.append(f"MIG enabled, {len(gpu.mig_devices)} MIG devices")
    return ", ".join(parts)


def _driver_data(driver: DriverInfo) -> dict[str, object]:
    return {
        "version": driver.version,
        "cuda": driver.cuda,
        "source": driver.source,
        "attached": driver.attached,
        "gpus": [dataclasses.asdict(g) for g in driver.gpus],
    }


def _no_driver(ctx: Context) -> CheckResult:
    profile, variant = ctx.profile, ctx.inputs.variant
    name = "driver"
    if profile is not None and (not profile.gpu or variant == "cpu"):
        return ok(name, f"{NO_DRIVER}; the cpu variant needs none", source=None)
    if profile is not None and variant is not None:
        return warn(
            name,
            f"{_NO_DRIVER_DETAIL}: the {variant} env can be built here but not run or GPU-tested",
            "run `verl-bootstrap doctor --prefix PREFIX` on the GPU host that will use the env",
            source=None,
        )
    fix = (
        "run on a host with an NVIDIA driver (installing one needs an administrator); for a "
        "GPU-less env use --profile cpu; to prepare an env for a GPU host sharing this filesystem "
        f"pass --cuda cuXYZ, or set {DRIVER_OVERRIDE}=<driver version> to make locks here"
    )
    check = fail if profile is not None else warn
    return check(name, _NO_DRIVER_DETAIL, fix, source=None)


def check_driver(ctx: Context) -> CheckResult:
    """The driver's version and CUDA, from the driver itself, and each GPU."""
    driver = ctx.driver
    if driver is None:
        return _no_driver(ctx)
    gpus = "; ".join(_gpu_line(g) for g in driver.gpus) or "no GPU listed"
    finding = f"NVIDIA driver {driver.version} serving CUDA {driver.cuda or 'unknown'}"
    if driver.source in (DRIVER_OVERRIDE, CONDA_OVERRIDE):
        finding += f", set by {driver.source} (not detected)"
    else:
        finding += f" (from {driver.source}); {gpus}"
    if driver.gpus and driver.attached and driver.attached > len(driver.gpus):
        return warn(
            "driver",
            f"{finding}; the driver reports {driver.attached} GPUs attached but describes "
            f"{len(driver.gpus)}",
            "look for a GPU that fell off the bus (`nvidia-smi -q`, kernel log Xid 79) and ask an "
            "administrator to reset it",
            **_driver_data(driver),
        )
    return ok("driver", finding, **_driver_data(driver))


def _served_variants(ctx: Context, driver: DriverInfo) -> list[VariantWindow]:
    profile = ctx.profile
    windows = [variant_window(n, v) for n, v in (profile.cuda_variants if profile else {}).items()]
    served = [w for w in windows if w.name != "cpu" and _runs(w, driver)]
    return sorted(served, key=lambda w: version_tuple(w.cuda or "0"))


def _runs(window: VariantWindow, driver: DriverInfo) -> bool:
    return window.admits(driver.version) and (
        window.cuda is None or driver_serves(driver.version, window.cuda)
    )


def _plan_window(ctx: Context) -> VariantWindow | CheckResult:
    profile, variant, name = ctx.profile, ctx.inputs.variant, "driver-vs-plan"
    if profile is None:
        return skipped(name, "no plan to compare with (no --profile given)")
    if variant is None:  # the profile was named, but no variant of it runs on this host
        return skipped(
            name, f"no CUDA variant of {profile.name} chosen here: pass --cuda cuXYZ to judge one"
        )
    if variant == "cpu":
        return ok(name, "the cpu variant needs no driver", variant=variant)
    if variant not in profile.cuda_variants:
        known = ", ".join(sorted(profile.cuda_variants))
        return fail(
            name, f"profile {profile.name!r} has no variant {variant}", f"use one of {known}"
        )
    return variant_window(variant, profile.cuda_variants[variant])


def check_driver_vs_plan(ctx: Context) -> CheckResult:
    """The driver must run the CUDA of the wheels the chosen variant installs."""
    window = _plan_window(ctx)
    if isinstance(window, CheckResult):
        return window
    data = dataclasses.asdict(window)
    driver = ctx.driver
    if driver is None:
        return skipped("driver-vs-plan", f"{NO_DRIVER} to compare with: {window.needs()}", **data)
    served = [w.name for w in _served_variants(ctx, driver)]
    data["served"] = served
    if _runs(window, driver):
        newest = f"; the newest variant it runs is {served[-1]}" if served else ""
        found = f"driver {driver.version} runs {window.name} (CUDA {window.cuda}): {window.needs()}"
        return ok("driver-vs-plan", found + newest, **data)
    alternative = f", or install --cuda {served[-1]}, which this driver runs" if served else ""
    return fail(
        "driver-vs-plan",
        f"driver {driver.version} (CUDA {driver.cuda or 'unknown'}) cannot run {window.name}: "
        f"{window.needs()}",
        f"ask an administrator for a driver of branch {window.min_driver} or newer{alternative}",
        **data,
    )


def _arch_list(ctx: Context, cuda: str | None) -> tuple[tuple[str, ...] | None, str]:
    torch = (ctx.env.probe or {}).get("torch", {}) if ctx.env else {}
    installed = torch.get("arch_list") if isinstance(torch, dict) else None
    if installed:
        return tuple(installed), f"the installed torch {torch.get('version')}"
    return planned_arch_list(cuda, ctx.platform), f"PyTorch's CUDA {cuda} wheels{_for(ctx)}"


def _for(ctx: Context) -> str:
    """Name the platform where its wheels differ from the usual x86_64 ones."""
    return "" if ctx.platform == "linux-64" else f" for {ctx.platform}"


def _visible_gpus(ctx: Context, driver: DriverInfo) -> list[GpuInfo]:
    seen = parse_visible_devices(ctx.environ.get("CUDA_VISIBLE_DEVICES"), driver.gpus)
    indices = {d.gpu_index for d in seen.devices}
    return [g for g in driver.gpus if g.index in indices]


def _cc(gpu: GpuInfo) -> str:
    return gpu.compute_capability or ""


def _label(gpu: GpuInfo) -> str:
    return f"GPU {gpu.index} {gpu.name} (cc {gpu.compute_capability})"


def _variants_building_for(ctx: Context, gpus: list[GpuInfo]) -> list[str]:
    """The profile's CUDA variants whose planned torch build runs on every one of `gpus`."""
    names: list[str] = []
    for name, variant in ctx.profile.cuda_variants.items() if ctx.profile else []:
        arch = planned_arch_list(variant_window(name, variant).cuda, ctx.platform) or ()
        if name != "cpu" and all(arch_supported(g.compute_capability or "", arch) for g in gpus):
            names.append(name)
    return names


def _build_problems(
    ctx: Context, gpus: list[GpuInfo], arch: tuple[str, ...], source: str
) -> tuple[list[str], list[str]]:
    """What is wrong, and the fix for each kind of wrong (arch list, bf16)."""
    outside = [g for g in gpus if not arch_supported(_cc(g), arch)]
    bf16 = bool(ctx.profile and ctx.profile.verify.bf16)
    no_bf16 = [g for g in gpus if bf16 and not supports_bf16(_cc(g))]
    problems = [f"{_label(g)} is not in {source}'s arch list ({', '.join(arch)})" for g in outside]
    problems += [f"{_label(g)} has no bf16, which needs cc >= 8.0" for g in no_bf16]
    fixes: list[str] = []
    if outside:
        names = _variants_building_for(ctx, outside)
        fixes.append(
            f"install --cuda {names[-1]}, whose torch build includes these GPUs"
            if names
            else "select GPUs the build includes with CUDA_VISIBLE_DEVICES"
        )
    if no_bf16:
        fixes.append(
            f"train on GPUs with cc >= 8.0 ({_BF16_GPUS}) selected with CUDA_VISIBLE_DEVICES, or "
            "use a profile that does not train in bf16 (verify.bf16: false)"
        )
    return problems, fixes


def _build_subject(ctx: Context, name: str) -> tuple[VariantWindow, list[GpuInfo]] | CheckResult:
    """The planned variant and the visible GPUs to judge, or the result that ends the check."""
    window = _plan_window(ctx)
    if ctx.inputs.variant == "cpu":
        return skipped(name, "the cpu variant uses no GPU")
    if isinstance(window, CheckResult):
        return dataclasses.replace(window, name=name)
    gpus = _visible_gpus(ctx, ctx.driver) if ctx.driver else []
    if not gpus:
        return skipped(name, "no GPU visible to compare with the build")
    unknown = [g for g in gpus if g.compute_capability is None]
    if unknown:
        return warn(
            name,
            f"compute capability unknown for {', '.join(_gpu_line(g) for g in unknown)}",
            "check it with `nvidia-smi --query-gpu=index,name,compute_cap --format=csv`",
            unknown=[g.index for g in unknown],
        )
    return window, gpus


def check_gpu_vs_build(ctx: Context) -> CheckResult:
    """Each visible GPU runs the planned torch build; bf16 is there where the profile needs it."""
    name = "gpu-vs-build"
    subject = _build_subject(ctx, name)
    if isinstance(subject, CheckResult):
        return subject
    window, gpus = subject
    arch, source = _arch_list(ctx, window.cuda)
    if arch is None:
        return warn(
            name,
            f"no known arch list for {source}",
            "after the install, `verl-bootstrap doctor --prefix PREFIX` reads the installed "
            "torch's own arch list",
        )
    bf16 = bool(ctx.profile and ctx.profile.verify.bf16)
    problems, fixes = _build_problems(ctx, gpus, arch, source)
    data = {"arch_list": list(arch), "arch_source": source, "bf16_required": bf16}
    # which GPUs each problem names, by index: what a script reads instead of the finding
    data["outside_arch"] = [g.index for g in gpus if not arch_supported(_cc(g), arch)]
    data["no_bf16"] = [g.index for g in gpus if bf16 and not supports_bf16(_cc(g))]
    if problems:
        return fail(name, "; ".join(problems), "; or ".join(fixes), **data)
    ccs = ", ".join(sorted({g.compute_capability or "" for g in gpus}))
    extra = " with bf16" if bf16 else ""
    return ok(name, f"{len(gpus)} GPU(s) of cc {ccs} run {source}{extra}", **data)


def check_visibility(ctx: Context) -> CheckResult:
    """Which physical GPUs a process will see under CUDA_VISIBLE_DEVICES, and as which ordinals."""
    note = ray_note(ctx.environ)
    value = ctx.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = ctx.driver.gpus if ctx.driver else ()
    if not gpus:
        return skipped(
            "visibility", "no GPUs listed to match CUDA_VISIBLE_DEVICES", value=value, ray=note
        )
    seen = parse_visible_devices(value, gpus, device_order=ctx.environ.get("CUDA_DEVICE_ORDER"))
    data = {
        "value": value,
        "devices": [dataclasses.asdict(d) for d in seen.devices],
        "ignored": list(seen.ignored),
        "warnings": list(seen.warnings),
        "ray": note,
    }
    finding = f"{seen.describe()}; under Ray each worker sees only the GPUs it was assigned"
    if seen.warnings:
        ids = f"indices 0..{len(gpus) - 1} or GPU-/MIG- UUIDs from `nvidia-smi -L`, each once"
        return warn("visibility", f"{finding}; " + "; ".join(seen.warnings), f"list {ids}", **data)
    return ok("visibility", finding, **data)
