"""Facts about the NVIDIA driver and GPUs, as frozen data."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DriverInfo", "GpuInfo", "MigDevice"]


@dataclass(frozen=True)
class MigDevice:
    """One MIG device carved out of a physical GPU."""

    index: int  # the MIG device index within its parent GPU
    uuid: str | None = None  # "MIG-…" (R470+); None when the source does not say
    memory_mib: int | None = None
    gpu_instance: int | None = None  # GI id, part of the old "MIG-GPU-<uuid>/<gi>/<ci>" form
    compute_instance: int | None = None  # CI id
    profile: str | None = None  # "3g.40gb", from `nvidia-smi -L`


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU (or MIG device) as the driver reports it."""

    index: int
    name: str
    uuid: str | None = None
    memory_mib: int | None = None
    compute_capability: str | None = None  # "9.0"; None when the source does not say
    mig: bool = False  # MIG mode is enabled on this GPU
    mig_devices: tuple[MigDevice, ...] = ()
    bus_id: str | None = None  # "00000000:8B:00.0"


@dataclass(frozen=True)
class DriverInfo:
    """The driver version, the highest CUDA it serves, and where we read them."""

    version: str  # "580.65.06", "595.80"
    cuda: str | None  # "13.0"; the driver's CUDA (UMD), not a toolkit's
    source: str  # "nvml", "/proc/driver/nvidia/version", "nvidia-smi", "VERL_BOOTSTRAP_CUDA_DRIVER"
    gpus: tuple[GpuInfo, ...] = ()
    attached: int | None = None  # GPUs the driver says are attached, when it says so

    @property
    def major(self) -> int:
        """The driver branch, e.g. 580."""
        return int(self.version.split(".")[0])
