"""The GPUs of an `nvidia-smi --query-gpu=... --format=csv` answer: detection asks for their compute
capability, which `-q -x` does not report. Titles and values both carry units ("81559 MiB")."""

from __future__ import annotations

import csv
import io

from verl_bootstrap.machine.gpu.driverinfo import GpuInfo
from verl_bootstrap.machine.gpu.smiparse import mib

__all__ = ["parse_query_gpus"]

_NA = {"", "[n/a]", "n/a", "[not supported]"}


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
