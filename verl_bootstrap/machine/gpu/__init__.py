"""What the machine's NVIDIA driver and GPUs are, read from the driver (never from a toolkit)."""

from __future__ import annotations

from verl_bootstrap.machine.gpu.cuda import (
    arch_supported,
    cuda_for_driver,
    driver_serves,
    max_cuda_major,
    planned_arch_list,
    supports_bf16,
)
from verl_bootstrap.machine.gpu.detect import detect_driver
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo, GpuInfo, MigDevice
from verl_bootstrap.machine.gpu.shadow import ForeignLib, LoadedLib, find_foreign_libs
from verl_bootstrap.machine.gpu.visible import (
    Visibility,
    VisibleDevice,
    parse_visible_devices,
    ray_note,
)

__all__ = [
    "DriverInfo",
    "ForeignLib",
    "GpuInfo",
    "LoadedLib",
    "MigDevice",
    "Visibility",
    "VisibleDevice",
    "arch_supported",
    "cuda_for_driver",
    "detect_driver",
    "driver_serves",
    "find_foreign_libs",
    "max_cuda_major",
    "parse_visible_devices",
    "planned_arch_list",
    "ray_note",
    "supports_bf16",
]
