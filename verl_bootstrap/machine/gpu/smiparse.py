"""Parsers for the driver's own reports: `nvidia-smi -q -x` and /proc.

Each parser is a pure function of the text. Text it does not recognise gives None (or an empty
tuple), never an exception, so detection can move on to the next source.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from verl_bootstrap.machine.gpu.driverinfo import DriverInfo, GpuInfo, MigDevice

__all__ = ["mib", "parse_proc_version", "parse_smi_xml"]

_NA = {"", "n/a", "[n/a]", "none", "not supported", "[not supported]"}
_MIB = re.compile(r"^\s*(\d+)\s*MiB\s*$", re.IGNORECASE)
# Proprietary: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  <date>".
# Open modules: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release …".
_NVRM = re.compile(r"^NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+){1,2})\b")


def _text(element: ET.Element | None, path: str) -> str | None:
    found = element.find(path) if element is not None else None
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value.lower() in _NA else value


def mib(value: str | None) -> int | None:
    """'81920 MiB' -> 81920; anything else -> None."""
    match = _MIB.match(value or "")
    return int(match[1]) if match else None


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _xml_mig(element: ET.Element) -> MigDevice:
    return MigDevice(
        index=_int(_text(element, "index")) or 0,
        memory_mib=mib(_text(element, "fb_memory_usage/total")),
        gpu_instance=_int(_text(element, "gpu_instance_id")),
        compute_instance=_int(_text(element, "compute_instance_id")),
    )


def _xml_gpu(index: int, element: ET.Element) -> GpuInfo:
    migs = tuple(_xml_mig(m) for m in element.findall("mig_devices/mig_device"))
    return GpuInfo(
        index=index,
        name=_text(element, "product_name") or "unknown GPU",
        uuid=_text(element, "uuid"),
        memory_mib=mib(_text(element, "fb_memory_usage/total")),
        mig=(_text(element, "mig_mode/current_mig") or "").lower() == "enabled",
        mig_devices=migs,
        bus_id=element.get("id"),
    )


def parse_smi_xml(text: str) -> DriverInfo | None:
    """`nvidia-smi -q -x` (dtd v11 to v13); GPU indices follow document order, as nvidia-smi's."""
    try:
        root = ET.fromstring(text)  # the local driver's own output, not untrusted input
    except ET.ParseError:
        return None
    version = _text(root, "driver_version")
    if root.tag != "nvidia_smi_log" or version is None:
        return None
    gpus = tuple(_xml_gpu(i, g) for i, g in enumerate(root.findall("gpu")))
    return DriverInfo(
        version=version,
        cuda=_text(root, "cuda_version"),
        source="nvidia-smi",
        gpus=gpus,
        attached=_int(_text(root, "attached_gpus")),
    )


def parse_proc_version(text: str) -> str | None:
    """The driver version in /proc/driver/nvidia/version, or None."""
    for line in text.splitlines():
        match = _NVRM.match(line.strip())
        if match:
            return match[1]
    return None
