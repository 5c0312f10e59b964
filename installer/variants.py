"""Which CUDA variant of a profile this machine gets, and why."""

from __future__ import annotations

from packaging.version import Version

from installer.errors import InputError, Refused
from installer.gpu.model import DriverInfo
from installer.profile.models import CudaVariant, Profile

__all__ = ["choose_variant", "driver_fits"]


def driver_fits(variant: CudaVariant, driver_version: str) -> bool:
    """The driver is within the variant's [min_driver, max_driver) range."""
    have = Version(driver_version)
    if variant.min_driver and have < Version(variant.min_driver):
        return False
    return not (variant.max_driver and have >= Version(variant.max_driver))


def choose_variant(profile: Profile, driver: DriverInfo | None, requested: str) -> tuple[str, str]:
    """(variant name, the reason) for `--cuda requested` on a host with `driver`."""
    if requested != "auto":
        return _explicit(profile, driver, requested)
    if not profile.gpu:
        return "cpu", f"profile {profile.name!r} is CPU-only"
    if driver is None:
        raise _no_driver(profile)
    fitting = [
        name
        for name, v in profile.cuda_variants.items()
        if name != "cpu" and driver_fits(v, driver.version)
    ]
    if not fitting:
        raise _too_old(profile, driver)
    best = max(fitting, key=lambda n: Version(profile.cuda_variants[n].cuda or "0"))
    return best, (
        f"driver {driver.version} (from {driver.source}) serves CUDA "
        f"{profile.cuda_variants[best].cuda}: {best} is the newest variant it can run"
    )


def _explicit(profile: Profile, driver: DriverInfo | None, requested: str) -> tuple[str, str]:
    if requested not in profile.cuda_variants:
        known = ", ".join(["auto", *sorted(profile.cuda_variants)])
        raise InputError(
            f"--cuda {requested}: profile {profile.name!r} has no such variant",
            hint=f"choose one of: {known}",
        )
    variant = profile.cuda_variants[requested]
    if requested == "cpu" or driver is None:
        why = "requested with --cuda"
        if driver is None and requested != "cpu":
            why += " on a host with no NVIDIA driver (preparing an env for a GPU host)"
        return requested, why
    if not driver_fits(variant, driver.version):
        raise Refused(
            f"--cuda {requested} needs driver {_range(variant)}, this host has {driver.version}",
            hint="use --cuda auto to pick the variant this driver serves",
        )
    return requested, f"requested with --cuda; driver {driver.version} serves it"


def _range(variant: CudaVariant) -> str:
    low = f">= {variant.min_driver}" if variant.min_driver else ""
    high = f"< {variant.max_driver}" if variant.max_driver else ""
    return " and ".join(p for p in (low, high) if p) or "(any)"


def _no_driver(profile: Profile) -> Refused:
    gpu_variants = ", ".join(n for n in sorted(profile.cuda_variants) if n != "cpu")
    return Refused(
        f"profile {profile.name!r} needs an NVIDIA GPU, and this host has no NVIDIA driver "
        "(a CUDA toolkit such as nvcc is not a driver)",
        hint=(
            "use --profile cpu for a GPU-less env, or pass --cuda with one of "
            f"{gpu_variants} to prepare an env for a GPU host that shares this filesystem"
        ),
    )


def _too_old(profile: Profile, driver: DriverInfo) -> Refused:
    ranges = "; ".join(
        f"{n}: {_range(v)}" for n, v in sorted(profile.cuda_variants.items()) if n != "cpu"
    )
    return Refused(
        f"driver {driver.version} serves none of profile {profile.name!r}'s CUDA variants",
        hint=f"variants and the drivers they need: {ranges}; update the NVIDIA driver",
    )
