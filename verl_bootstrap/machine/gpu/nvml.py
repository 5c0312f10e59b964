"""Read the driver through NVML (`libnvidia-ml.so.1`) with ctypes: no extra dependency.

NVML ships with the driver itself, so a library that fails to load means there is no driver.
Any NVML call that fails (an old driver without a symbol, a GPU that does not answer) leaves that
fact unknown instead of failing the whole read.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from verl_bootstrap.machine.gpu.driverinfo import DriverInfo, GpuInfo, MigDevice

__all__ = ["NVML_LIBRARY", "read_nvml"]

NVML_LIBRARY = "libnvidia-ml.so.1"
_OK = 0
_BUFFER = 96  # NVML's largest name/UUID/version buffer size constant is 96 bytes
_MIG_ENABLED = 1


class _Memory(ctypes.Structure):
    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


def _call(lib: Any, name: str, *args: Any) -> bool:
    """Call an NVML function; False when it is missing from this driver or returns an error."""
    function: Callable[..., int] | None = getattr(lib, name, None)
    return function is not None and function(*args) == _OK


def _string(lib: Any, name: str, *args: Any) -> str | None:
    buffer = ctypes.create_string_buffer(_BUFFER)
    if not _call(lib, name, *args, buffer, ctypes.c_uint(_BUFFER)):
        return None
    return buffer.value.decode("utf-8", "replace")


def _memory_mib(lib: Any, handle: ctypes.c_void_p) -> int | None:
    memory = _Memory()
    if not _call(lib, "nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory)):
        return None
    return int(memory.total // (1024 * 1024))


def _compute_capability(lib: Any, handle: ctypes.c_void_p) -> str | None:
    major, minor = ctypes.c_int(), ctypes.c_int()
    if not _call(
        lib, "nvmlDeviceGetCudaComputeCapability", handle, ctypes.byref(major), ctypes.byref(minor)
    ):
        return None
    return f"{major.value}.{minor.value}"


def _mig_enabled(lib: Any, handle: ctypes.c_void_p) -> bool:
    current, pending = ctypes.c_uint(), ctypes.c_uint()
    # GPUs without MIG answer NVML_ERROR_NOT_SUPPORTED, which reads as "not enabled".
    found = _call(lib, "nvmlDeviceGetMigMode", handle, ctypes.byref(current), ctypes.byref(pending))
    return found and current.value == _MIG_ENABLED


def _mig_devices(lib: Any, handle: ctypes.c_void_p) -> tuple[MigDevice, ...]:
    count = ctypes.c_uint()
    if not _call(lib, "nvmlDeviceGetMaxMigDeviceCount", handle, ctypes.byref(count)):
        return ()
    devices: list[MigDevice] = []
    for slot in range(count.value):
        mig = ctypes.c_void_p()
        if not _call(lib, "nvmlDeviceGetMigDeviceHandleByIndex", handle, slot, ctypes.byref(mig)):
            continue  # empty slots answer NVML_ERROR_NOT_FOUND
        uuid = _string(lib, "nvmlDeviceGetUUID", mig)
        devices.append(MigDevice(index=slot, uuid=uuid, memory_mib=_memory_mib(lib, mig)))
    return tuple(devices)


def _gpu(lib: Any, index: int) -> GpuInfo | None:
    handle = ctypes.c_void_p()
    if not _call(lib, "nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle)):
        return None
    mig = _mig_enabled(lib, handle)
    return GpuInfo(
        index=index,
        name=_string(lib, "nvmlDeviceGetName", handle) or "unknown GPU",
        uuid=_string(lib, "nvmlDeviceGetUUID", handle),
        memory_mib=_memory_mib(lib, handle),
        compute_capability=_compute_capability(lib, handle),
        mig=mig,
        mig_devices=_mig_devices(lib, handle) if mig else (),
    )


def _cuda_version(lib: Any) -> str | None:
    value = ctypes.c_int()
    if not _call(lib, "nvmlSystemGetCudaDriverVersion_v2", ctypes.byref(value)):
        return None
    return f"{value.value // 1000}.{value.value % 1000 // 10}"  # 13000 -> "13.0"


def _read(lib: Any) -> DriverInfo | None:
    version = _string(lib, "nvmlSystemGetDriverVersion")
    if version is None:
        return None
    count = ctypes.c_uint()
    if not _call(lib, "nvmlDeviceGetCount_v2", ctypes.byref(count)):
        count.value = 0
    gpus = tuple(g for i in range(count.value) if (g := _gpu(lib, i)) is not None)
    return DriverInfo(
        version=version, cuda=_cuda_version(lib), source="nvml", gpus=gpus, attached=count.value
    )


def read_nvml(library: str = NVML_LIBRARY) -> DriverInfo | None:
    """The driver and its GPUs from NVML; None when NVML is absent or will not initialise."""
    try:
        lib = ctypes.CDLL(library)
    except OSError:
        return None  # no libnvidia-ml: no NVIDIA driver on this host
    if not _call(lib, "nvmlInit_v2"):
        return None
    try:
        return _read(lib)
    finally:
        _call(lib, "nvmlShutdown")
