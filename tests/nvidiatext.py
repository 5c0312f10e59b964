"""Readers for recorded `nvidia-smi` outputs that the tool itself never reads: the plain table,
`-L`, and a `--query-gpu` CSV's driver column. They stand a recorded GPU in as a DriverInfo where
no `-q -x` capture of it exists (the H100 and H200 captures are tables).

The tool reads `-q -x` (gpu.smiparse.parse_smi_xml) and `--query-gpu`'s GPUs
(gpu.query.parse_query_gpus); the CSV reader here takes its GPUs from the latter.
The table changed over driver generations: R610 prints `KMD Version:` / `CUDA UMD Version:`,
Windows has a `Driver-Model` column, some versions have two parts (595.80), and the MIG block's
column titles differ between 535 and 590. The reader keys on the shapes of values, not titles.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace

from verl_bootstrap.machine.gpu.cuda import known_compute_capability
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo, GpuInfo, MigDevice
from verl_bootstrap.machine.gpu.query import parse_query_gpus

_HEADER = re.compile(r"(?:Driver|KMD) Version:\s*(\S+)\s+CUDA (?:UMD )?Version:\s*(\S+)")
_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_GPU_ROW = re.compile(rf"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off|WDDM|TCC|MCDM|N/A)\s+\|\s+({_BUS})\s")
_MEMORY = re.compile(r"\|\s*\d+MiB\s*/\s*(\d+)MiB\s*\|")
_MIG_MODE = re.compile(r"\|\s*(Enabled|Disabled)\s*\|\s*$")
_MIG_ROW = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s+\d+MiB\s*/\s*(\d+)MiB")
_LIST_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: (\S+)\)\s*$")
_LIST_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (\S+)\)\s*$")


def _table_gpu(lines: list[str], at: int, row: re.Match[str]) -> GpuInfo:
    memory = _MEMORY.search(lines[at + 1]) if at + 1 < len(lines) else None
    mig = _MIG_MODE.search(lines[at + 2]) if at + 2 < len(lines) else None
    name = row[2].strip()
    return GpuInfo(
        index=int(row[1]),
        name=name,
        compute_capability=known_compute_capability(name),  # the table itself does not say
        memory_mib=int(memory[1]) if memory else None,
        mig=bool(mig and mig[1] == "Enabled"),
        bus_id=row[3],
    )


def _mig_rows(lines: list[str]) -> list[tuple[int, MigDevice]]:
    rows: list[tuple[int, MigDevice]] = []
    inside = False
    for line in lines:
        if "MIG devices:" in line:
            inside = True
        elif "Processes:" in line:
            inside = False
        match = _MIG_ROW.match(line) if inside else None
        if match:
            device = MigDevice(
                index=int(match[4]),
                memory_mib=int(match[5]),
                gpu_instance=int(match[2]),
                compute_instance=int(match[3]),
            )
            rows.append((int(match[1]), device))
    return rows


def parse_smi_table(text: str) -> DriverInfo | None:
    """The plain `nvidia-smi` table: driver, CUDA, and each GPU with its MIG devices."""
    header = _HEADER.search(text)
    if not header:
        return None
    lines = text.splitlines()
    gpus = [_table_gpu(lines, i, m) for i, line in enumerate(lines) if (m := _GPU_ROW.match(line))]
    for parent, device in _mig_rows(lines):
        gpus = [
            replace(g, mig_devices=(*g.mig_devices, device)) if g.index == parent else g
            for g in gpus
        ]
    cuda = header[2] if header[2].lower() != "n/a" else None
    return DriverInfo(version=header[1], cuda=cuda, source="nvidia-smi", gpus=tuple(gpus))


def parse_query_csv(text: str) -> DriverInfo | None:
    """`nvidia-smi --query-gpu=... --format=csv` with a driver field. It names no CUDA version."""
    rows = list(csv.DictReader(io.StringIO(text.strip()), skipinitialspace=True))
    first = {
        key.split(" [", 1)[0].strip(): value.strip() for key, value in (rows or [{}])[0].items()
    }
    version = first.get("kmd_version") or first.get("driver_version")
    if not version or version.lower() in {"[n/a]", "n/a"}:
        return None
    count = first.get("count", "")
    return DriverInfo(
        version=version,
        cuda=None,
        source="nvidia-smi",
        gpus=parse_query_gpus(text),
        attached=int(count) if count.isdigit() else None,
    )


def parse_smi_list(text: str) -> tuple[GpuInfo, ...]:
    """`nvidia-smi -L`: GPUs with their UUIDs, and MIG devices under their parent."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        gpu = _LIST_GPU.match(line)
        mig = _LIST_MIG.match(line)
        if gpu:
            gpus.append(GpuInfo(index=int(gpu[1]), name=gpu[2], uuid=gpu[3]))
        elif mig and gpus:
            device = MigDevice(index=int(mig[2]), uuid=mig[3], profile=mig[1])
            parent = gpus[-1]
            gpus[-1] = replace(parent, mig=True, mig_devices=(*parent.mig_devices, device))
    return tuple(gpus)
