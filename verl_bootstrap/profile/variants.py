"""Which CUDA variant of a profile to install, given the driver: `--cuda auto` and its reason."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from verl_bootstrap.errors import InputError, Refused
from verl_bootstrap.machine.gpu.cuda import MIN_DRIVER_FOR_CUDA_MAJOR, version_tuple
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.profile.models import CudaVariant, Profile

__all__ = [
    "VariantWindow",
    "choose_variant",
    "default_variant",
    "known_variant",
    "variant_window",
]

_NO_DRIVER_HINT = (
    "use --profile cpu for a GPU-less env, or pass --cuda cuXYZ (e.g. --cuda cu130) to prepare "
    "an env for a GPU host that shares this filesystem"
)


@dataclass(frozen=True)
class VariantWindow:
    """The CUDA of a variant's wheels and the drivers that run them (max is exclusive)."""

    name: str
    cuda: str | None
    min_driver: str | None
    max_driver: str | None

    def admits(self, driver_version: str) -> bool:
        """Whether a driver of this version runs the variant."""
        got = version_tuple(driver_version)
        low = version_tuple(self.min_driver) if self.min_driver else ()
        high = version_tuple(self.max_driver) if self.max_driver else ()
        return got >= low and (not high or got < high)

    def needs(self) -> str:
        """'cu130 needs driver >= 580', for messages."""
        bounds = [f">= {self.min_driver}"] if self.min_driver else []
        bounds += [f"< {self.max_driver}"] if self.max_driver else []
        return f"{self.name} needs driver {' and '.join(bounds) or 'of any version'}"


def _cuda_of(name: str, variant: CudaVariant) -> str | None:
    if variant.cuda:
        return variant.cuda
    if name.startswith("cu") and name[2:].isdigit():
        return f"{name[2:-1]}.{name[-1]}"  # cu128 -> 12.8, the naming every CUDA wheel index uses
    return None


def variant_window(name: str, variant: CudaVariant) -> VariantWindow:
    """The driver window of a variant; a missing min_driver comes from its CUDA major."""
    cuda = _cuda_of(name, variant)
    minimum = variant.min_driver
    if minimum is None and cuda:
        branch = MIN_DRIVER_FOR_CUDA_MAJOR.get(version_tuple(cuda)[0])
        minimum = str(branch) if branch else None
    return VariantWindow(name, cuda, minimum, variant.max_driver)


def _gpu_windows(profile: Profile) -> list[VariantWindow]:
    return [variant_window(n, v) for n, v in profile.cuda_variants.items() if n != "cpu"]


def known_variant(profile: Profile, requested: str) -> str:
    """`requested` when the profile has that variant; the one check (and message) for a --cuda
    the profile lacks, for an install, a plan and a lock alike."""
    if requested not in profile.cuda_variants:
        known = ", ".join(sorted(profile.cuda_variants))
        raise InputError(
            f"--cuda {requested}: profile {profile.name!r} has no such variant",
            hint=f"its variants: {known}; or leave --cuda out (an install then takes --cuda "
            "auto, the newest variant the driver runs; a lock locks every variant)",
            data={
                "profile": profile.name,
                "variant": requested,
                "variants": sorted(profile.cuda_variants),
            },
        )
    return requested


def _explicit(profile: Profile, requested: str) -> tuple[str, str]:
    known_variant(profile, requested)
    return requested, f"{requested} was asked for with --cuda"


def _refuse_unserved(profile: Profile, driver: DriverInfo, windows: list[VariantWindow]) -> None:
    needs = "; ".join(w.needs() for w in windows)
    cpu = ", or --cuda cpu" if "cpu" in profile.cuda_variants else ""
    raise Refused(
        f"driver {driver.version} runs none of profile {profile.name!r}'s CUDA variants ({needs})",
        hint=f"ask an administrator for a newer driver, or use another profile{cpu}",
        data={
            "profile": profile.name,
            "driver": driver.version,
            "windows": [asdict(w) for w in windows],
        },
    )


def default_variant(profile: Profile) -> VariantWindow | None:
    """The profile's default GPU variant: the newest CUDA, what `--cuda auto` takes on a host
    whose driver runs every variant (None: the profile has only the cpu variant)."""
    windows = _gpu_windows(profile)
    return max(windows, key=lambda w: version_tuple(w.cuda or "0")) if windows else None


def _planned_without_driver(profile: Profile) -> tuple[str, str]:
    """`plan` on a host with no driver (a login node): the default variant, and that it is one."""
    chosen = default_variant(profile)
    assert chosen is not None
    others = " or ".join(sorted(n for n in profile.cuda_variants if n not in (chosen.name, "cpu")))
    other = f"; --cuda {others} plans another" if others else ""
    return chosen.name, (
        f"no NVIDIA driver on this host: planned for the default variant of {profile.name!r}, "
        f"{chosen.name} (CUDA {chosen.cuda}, its newest; {chosen.needs()}){other}; an install "
        "here picks none without --cuda"
    )


def choose_variant(
    profile: Profile, driver: DriverInfo | None, requested: str, *, planning: bool = False
) -> tuple[str, str]:
    """The variant to install and why. `auto` picks the newest CUDA the driver runs; with no
    driver, a plan (`planning`) takes the profile's default variant and an install is refused."""
    if requested != "auto":
        return _explicit(profile, requested)
    windows = _gpu_windows(profile)
    if not windows:
        return "cpu", f"profile {profile.name!r} has only the cpu variant"
    if driver is None and planning:
        return _planned_without_driver(profile)
    if driver is None:
        raise Refused(
            f"no NVIDIA driver on this host, and profile {profile.name!r} needs one to pick its "
            "CUDA variant",
            hint=_NO_DRIVER_HINT,
            data={"profile": profile.name, "driver": None},
        )
    served = [w for w in windows if w.admits(driver.version)]
    if not served:
        _refuse_unserved(profile, driver, windows)
    best = max(served, key=lambda w: version_tuple(w.cuda or "0"))
    others = [w.needs() for w in windows if w not in served]
    reason = (
        f"driver {driver.version} (CUDA {driver.cuda or 'unknown'}, from {driver.source}) runs "
        f"{best.name} (CUDA {best.cuda}); it is the newest variant of {profile.name!r} it runs"
    )
    return best.name, reason + (f"; not {', '.join(others)}" if others else "")
