"""Parsers for the two human-shaped `nvidia-smi` outputs: the plain table and `--query-gpu` CSV.

The table changed over driver generations: R610 prints `KMD Version:` / `CUDA UMD Version:`,
Windows has a `Driver-Model` column, some versions have two parts (595.80), and the MIG block's
column titles differ between 535 and 590. The parsers key on the shapes of values, not titles.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace

from verl_bootstrap.gpu.cuda import known_compute_capability
from verl_bootstrap.gpu.model import DriverInfo, GpuInfo, MigDevice
from verl_bootstrap.gpu.parse import mib

__all__ = ["parse_query_csv", "parse_query_gpus", "parse_smi_table"]

_HEADER = re.compile(r"(?:Driver|KMD) Version:\s*(\S+)\s+CUDA (?:UMD )?Version:\s*(\S+)")
_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_GPU_ROW = re.compile(rf"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off|WDDM|TCC|MCDM|N/A)\s+\|\s+({_BUS})\s")
_MEMORY = re.compile(r"\|\s*\d+MiB\s*/\s*(\d+)MiB\s*\|")
_MIG_MODE = re.compile(r"\|\s*(Enabled|Disabled)\s*\|\s*$")
_MIG_ROW = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s+\d+MiB\s*/\s*(\d+)MiB")
_NA = {"", "[n/a]", "n/a", "[not supported]"}


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


def _csv_rows(text: str) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(text.strip()), skipinitialspace=True)
    rows = [row for row in reader if row]
    if len(rows) < 2:
        return []
    # Titles carry units ("memory.total [MiB]"); values carry them too ("81559 MiB").
    keys = [title.split(" [", 1)[0].strip() for title in rows[0]]
    return [dict(zip(keys, (v.strip() for v in row), strict=False)) for row in rows[1:]]


def _value(row: dict[str, str], key: str) -> str | None:
    value = row.get(key)
    return None if value is None or value.lower() in _NA else value


def _csv_gpu(position: int, row: dict[str, str]) -> GpuInfo:
    index = _value(row, "index")
    memory = _value(row, "memory.total")
    return GpuInfo(
        index=int(index) if index and index.isdigit() else position,
        name=_value(row, "name") or "unknown GPU",
        uuid=_value(row, "uuid"),
        memory_mib=mib(memory) or (int(memory) if memory and memory.isdigit() else None),
        compute_capability=_value(row, "compute_cap"),
        mig=(_value(row, "mig.mode.current") or "").lower() == "enabled",
        bus_id=_value(row, "pci.bus_id"),
    )


def parse_query_gpus(text: str) -> tuple[GpuInfo, ...]:
    """The GPUs of a `--query-gpu=... --format=csv` answer (any set of fields, header included)."""
    return tuple(_csv_gpu(i, row) for i, row in enumerate(_csv_rows(text)))


def parse_query_csv(text: str) -> DriverInfo | None:
    """`nvidia-smi --query-gpu=... --format=csv` with a driver field. It names no CUDA version."""
    rows = _csv_rows(text)
    first = rows[0] if rows else {}
    version = _value(first, "kmd_version") or _value(first, "driver_version")
    if not version:
        return None
    count = _value(first, "count")
    return DriverInfo(
        version=version,
        cuda=None,
        source="nvidia-smi",
        gpus=parse_query_gpus(text),
        attached=int(count) if count and count.isdigit() else None,
    )
