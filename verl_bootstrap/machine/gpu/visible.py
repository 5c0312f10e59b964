"""CUDA_VISIBLE_DEVICES read the way the CUDA driver reads it, and what Ray does to it.

The driver's rules: unset means every GPU; an empty value means none; entries are GPU indices,
`GPU-<uuid>` (any unique prefix) or MIG ids (`MIG-<uuid>`, or the R450/R460 form
`MIG-GPU-<uuid>/<gi>/<ci>`). The first entry that is invalid, matches nothing, or repeats an
earlier one ends the list: it and every entry after it are ignored. Inside the process the
devices that remain are numbered 0..n-1 in list order, whatever their physical indices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from verl_bootstrap.machine.gpu.driverinfo import GpuInfo, MigDevice

__all__ = [
    "RAY_NOSET",
    "Visibility",
    "VisibleDevice",
    "parse_visible_devices",
    "ray_note",
]

RAY_NOSET = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class VisibleDevice:
    """One device a CUDA process will see."""

    ordinal: int  # torch's cuda:<ordinal> inside the process
    gpu_index: int  # the physical GPU's index, as nvidia-smi numbers it
    name: str
    uuid: str | None
    mig_uuid: str | None = None  # set when the entry picks a MIG device


@dataclass(frozen=True)
class Visibility:
    """What a process started with this CUDA_VISIBLE_DEVICES will see."""

    value: str | None  # the variable as set; None when unset
    devices: tuple[VisibleDevice, ...]
    ignored: tuple[str, ...] = ()  # entries the driver drops (the first bad one and all after)
    warnings: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: which physical GPUs, and as which ordinals."""
        shown = "unset" if self.value is None else repr(self.value)
        if not self.devices:
            return f"CUDA_VISIBLE_DEVICES={shown}: processes see no GPU"
        pairs = ", ".join(f"GPU {d.gpu_index} as cuda:{d.ordinal}" for d in self.devices)
        return f"CUDA_VISIBLE_DEVICES={shown}: processes see {pairs}"


_Match = tuple[GpuInfo, MigDevice | None]


def _unique(candidates: Sequence[_Match]) -> _Match | None:
    return candidates[0] if len(candidates) == 1 else None


def _by_uuid(token: str, gpus: Sequence[GpuInfo]) -> _Match | None:
    wanted = token.lower()
    return _unique([(g, None) for g in gpus if (g.uuid or "").lower().startswith(wanted)])


def _by_mig_uuid(token: str, gpus: Sequence[GpuInfo]) -> _Match | None:
    wanted = token.lower()
    found: list[_Match] = [
        (g, m) for g in gpus for m in g.mig_devices if (m.uuid or "").lower().startswith(wanted)
    ]
    return _unique(found)


def _by_mig_gpu(token: str, gpus: Sequence[GpuInfo]) -> _Match | None:
    """'MIG-GPU-<uuid>/<gi>/<ci>': the GPU instance and compute instance of one GPU."""
    parts = token[len("MIG-") :].split("/")
    if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
        return None
    parent = _by_uuid(parts[0], gpus)
    if parent is None:
        return None
    gi, ci = int(parts[1]), int(parts[2])
    gpu = parent[0]
    return _unique(
        [(gpu, m) for m in gpu.mig_devices if (m.gpu_instance, m.compute_instance) == (gi, ci)]
    )


def _match(token: str, gpus: Sequence[GpuInfo]) -> _Match | None:
    upper = token.upper()
    if token.isdigit():
        return _unique([(g, None) for g in gpus if g.index == int(token)])
    if upper.startswith("MIG-GPU-"):
        return _by_mig_gpu(token, gpus)
    if upper.startswith("MIG-"):
        return _by_mig_uuid(token, gpus)
    if upper.startswith("GPU-"):
        return _by_uuid(token, gpus)
    return None


def _select(entries: list[str], gpus: Sequence[GpuInfo]) -> tuple[list[_Match], list[str], str]:
    """Matched devices in order, the ignored tail, and why the list ended early ('' if not)."""
    chosen: list[_Match] = []
    for position, token in enumerate(entries):
        found = _match(token, gpus)
        why = "" if found else f"entry {token!r} matches no GPU"
        if found and found in chosen:
            why = f"entry {token!r} names a device already listed"
        if why:
            return chosen, entries[position:], why
        if found:
            chosen.append(found)
    return chosen, [], ""


def _mig_warnings(chosen: list[_Match]) -> list[str]:
    notes = [
        f"GPU {g.index} has MIG enabled: a CUDA process uses one MIG device of it, not the whole "
        "GPU; pick one with CUDA_VISIBLE_DEVICES=MIG-<uuid> (`nvidia-smi -L` lists them)"
        for g, m in chosen
        if g.mig and m is None
    ]
    if sum(1 for _, m in chosen if m is not None) > 1:
        notes.append("more than one MIG device listed: a CUDA process enumerates only the first")
    return notes


def _order_warning(gpus: Sequence[GpuInfo], device_order: str | None) -> list[str]:
    if len({g.name for g in gpus}) <= 1 or device_order == "PCI_BUS_ID":
        return []
    return [
        "GPUs of different models: CUDA numbers them fastest first, not as nvidia-smi does; "
        "set CUDA_DEVICE_ORDER=PCI_BUS_ID so indices mean the same in both"
    ]


def parse_visible_devices(
    value: str | None, gpus: Sequence[GpuInfo], *, device_order: str | None = None
) -> Visibility:
    """Which of `gpus` a process sees under CUDA_VISIBLE_DEVICES=`value` (None: unset)."""
    if value is None:
        chosen: list[_Match] = [(g, None) for g in gpus]
        ignored: list[str] = []
        why = ""
    else:
        entries = [e.strip() for e in value.split(",")] if value.strip() else []
        chosen, ignored, why = _select(entries, gpus)
    warnings = [f"{why}: CUDA ignores it and every entry after it"] if why else []
    if value is not None and not value.strip() and gpus:
        warnings.append("CUDA_VISIBLE_DEVICES is empty: every GPU is hidden")
    warnings += _mig_warnings(chosen) + _order_warning(gpus, device_order)
    devices = tuple(
        VisibleDevice(
            ordinal=i, gpu_index=g.index, name=g.name, uuid=g.uuid, mig_uuid=m.uuid if m else None
        )
        for i, (g, m) in enumerate(chosen)
    )
    return Visibility(value, devices, ignored=tuple(ignored), warnings=tuple(warnings))


def ray_note(environ: Mapping[str, str]) -> str:
    """What Ray does to CUDA_VISIBLE_DEVICES in each worker, and what verl makes of it."""
    if environ.get(RAY_NOSET, "") not in ("", "0"):
        return (
            f"{RAY_NOSET} is set: Ray leaves CUDA_VISIBLE_DEVICES alone in its workers, so every "
            "worker sees the GPUs above, and verl calls torch.cuda.set_device with the "
            "accelerator id Ray assigned (an index into that list)."
        )
    return (
        "Under Ray, each worker gets CUDA_VISIBLE_DEVICES set to the GPUs Ray assigned it, so "
        "inside the worker the assigned GPU is cuda:0 and torch.cuda.current_device() in verl is "
        "a logical index, not the physical one; pass ordinals (0..n-1), never physical ids, as "
        f"device ids. With {RAY_NOSET}=1 Ray leaves the variable alone and verl calls "
        "torch.cuda.set_device with the accelerator id Ray assigned."
    )
