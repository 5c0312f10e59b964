"""CUDA_VISIBLE_DEVICES as the driver reads it, over GPUs from recorded real outputs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from nvidiatext import parse_smi_list

from verl_bootstrap.machine.gpu.driverinfo import GpuInfo
from verl_bootstrap.machine.gpu.smiparse import parse_smi_xml
from verl_bootstrap.machine.gpu.visible import RAY_NOSET, parse_visible_devices, ray_note

DATA = Path(__file__).parent / "data" / "nvidia"
A = "GPU-12345678-aaaa-bbbb-cccc-0123456789ab"  # the two recorded RTX A5000s
B = "GPU-12345678-aaaa-bbbb-cccc-0123456789cd"


def _gpus(name: str) -> tuple[GpuInfo, ...]:
    info = parse_smi_xml((DATA / name).read_text(encoding="utf-8"))
    assert info is not None
    return info.gpus


@pytest.fixture
def pair() -> tuple[GpuInfo, ...]:
    return _gpus("590.44.01-RTXA5000x2-qx.xml")


def _seen(value: str | None, gpus: tuple[GpuInfo, ...]) -> list[tuple[int, int]]:
    return [(d.ordinal, d.gpu_index) for d in parse_visible_devices(value, gpus).devices]


def test_unset_means_every_gpu_in_order(pair: tuple[GpuInfo, ...]) -> None:
    assert _seen(None, pair) == [(0, 0), (1, 1)]


def test_empty_means_none_and_says_so(pair: tuple[GpuInfo, ...]) -> None:
    seen = parse_visible_devices("", pair)
    assert seen.devices == ()
    assert any("empty" in w for w in seen.warnings)
    assert "see no GPU" in seen.describe()


def test_physical_gpu_1_becomes_ordinal_0(pair: tuple[GpuInfo, ...]) -> None:
    assert _seen("1", pair) == [(0, 1)]
    assert _seen("1,0", pair) == [(0, 1), (1, 0)]
    assert "GPU 1 as cuda:0" in parse_visible_devices("1", pair).describe()


def test_an_unmatched_entry_hides_every_entry_after_it(pair: tuple[GpuInfo, ...]) -> None:
    seen = parse_visible_devices("0,7,1", pair)
    assert [d.gpu_index for d in seen.devices] == [0]
    assert seen.ignored == ("7", "1")
    assert "'7' matches no GPU" in seen.warnings[0]


def test_garbage_or_negative_first_entry_hides_everything(pair: tuple[GpuInfo, ...]) -> None:
    assert _seen("-1", pair) == []
    assert _seen("gpu0,1", pair) == []


def test_duplicates_are_invalid(pair: tuple[GpuInfo, ...]) -> None:
    seen = parse_visible_devices("1,1,0", pair)
    assert [d.gpu_index for d in seen.devices] == [1]
    assert seen.ignored == ("1", "0")
    assert "already listed" in seen.warnings[0]


def test_uuid_prefixes_must_be_unique(pair: tuple[GpuInfo, ...]) -> None:
    assert _seen(B, pair) == [(0, 1)]
    assert _seen("GPU-12345678-aaaa-bbbb-cccc-0123456789c", pair) == [(0, 1)]
    assert _seen("GPU-12345678", pair) == []  # both A5000s start so: ambiguous
    assert _seen(f"{B.lower()}, {A}", pair) == [(0, 1), (1, 0)]


def test_mig_uuid_selects_a_mig_device() -> None:
    gpus = parse_smi_list((DATA / "590.48.01-H100-MIG-list.txt").read_text(encoding="utf-8"))
    seen = parse_visible_devices("MIG-00000002-0000-0000-0000-000000000002", gpus)
    assert [(d.ordinal, d.gpu_index, d.mig_uuid) for d in seen.devices] == [
        (0, 0, "MIG-00000002-0000-0000-0000-000000000002")
    ]
    both = parse_visible_devices(
        "MIG-00000002-0000-0000-0000-000000000002,MIG-00000003-0000-0000-0000-000000000003", gpus
    )
    assert any("only the first" in w for w in both.warnings)


def test_old_mig_gpu_form_uses_gpu_and_compute_instance_ids() -> None:
    gpus = _gpus("535.54.03-A100-SXM4-80GBx4-MIG-qx.xml")
    seen = parse_visible_devices("MIG-GPU-513536b6-7d19-9063-b049-1e69664bb298/4/0", gpus)
    assert [d.gpu_index for d in seen.devices] == [0]
    assert parse_visible_devices("MIG-GPU-513536b6/9/0", gpus).devices == ()


def test_whole_gpu_with_mig_enabled_warns() -> None:
    gpus = _gpus("535.54.03-A100-SXM4-80GBx4-MIG-qx.xml")
    seen = parse_visible_devices(None, gpus)
    assert any("MIG enabled" in w for w in seen.warnings)


def test_mixed_models_warn_about_device_order(pair: tuple[GpuInfo, ...]) -> None:
    rtx3080 = _gpus("595.58.03-RTX3080-qx.xml")[0]
    mixed = (pair[0], replace(rtx3080, index=1))  # two recorded hosts' GPUs, as one machine
    assert any("CUDA_DEVICE_ORDER" in w for w in parse_visible_devices(None, mixed).warnings)
    quiet = parse_visible_devices(None, mixed, device_order="PCI_BUS_ID")
    assert quiet.warnings == ()


def test_ray_note_explains_both_modes() -> None:
    assert "cuda:0" in ray_note({}) and RAY_NOSET in ray_note({})
    assert "leaves CUDA_VISIBLE_DEVICES alone" in ray_note({RAY_NOSET: "1"})
