"""Driver-to-CUDA rules and torch arch lists, checked against the recorded driver outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from nvidiatext import parse_smi_table

from verl_bootstrap.machine.gpu.cuda import (
    arch_supported,
    cuda_for_driver,
    driver_for_cuda,
    driver_serves,
    max_cuda_major,
    planned_arch_list,
    supports_bf16,
)
from verl_bootstrap.machine.gpu.smiparse import parse_smi_xml

DATA = Path(__file__).parent / "data" / "nvidia"


def _recorded_pairs() -> list[tuple[str, str]]:
    pairs = []
    for path in sorted(DATA.iterdir()):
        text = path.read_text(encoding="utf-8")
        info = parse_smi_xml(text) if path.suffix == ".xml" else parse_smi_table(text)
        if info is not None and info.cuda:
            pairs.append((info.version, info.cuda))
    return pairs


def test_branch_table_agrees_with_every_recorded_driver() -> None:
    pairs = _recorded_pairs()
    assert len(pairs) == 18
    for version, cuda in pairs:
        assert cuda_for_driver(version) == cuda, version


@pytest.mark.parametrize(
    ("driver", "cuda", "serves"),
    [
        ("580.65.06", "13.0", True),
        ("580.65.06", "12.8", True),  # drivers are backward compatible
        ("590.44.01", "13.2", True),  # minor-version compatibility inside 13.x
        ("575.57.08", "13.0", False),  # 12.x drivers give 12.x only
        ("535.54.03", "12.8", True),
        ("525.147.05", "12.9", True),
        ("515.105.01", "12.0", False),
        ("470.74", "11.8", True),
        ("440.33", "11.0", False),
        ("595.80", "13.0", True),  # two-part versions
        ("580", "10.2", False),  # outside the table: never claimed
    ],
)
def test_driver_serves_by_minor_version_compatibility(driver: str, cuda: str, serves: bool) -> None:
    assert driver_serves(driver, cuda) is serves


def test_max_cuda_major_by_branch() -> None:
    assert max_cuda_major("610.57.04") == 13
    assert max_cuda_major("580") == 13
    assert max_cuda_major("579.99") == 12
    assert max_cuda_major("525.60.13") == 12
    assert max_cuda_major("470.74") == 11
    assert max_cuda_major("418.87") is None
    assert max_cuda_major("garbage") is None


def test_driver_for_cuda_is_the_first_branch_reporting_it() -> None:
    assert driver_for_cuda("12.8") == "570"
    assert driver_for_cuda("13.0") == "580"
    assert driver_for_cuda("12") == "525"
    assert driver_for_cuda("9.2") is None


@pytest.mark.parametrize(
    ("cc", "arch", "runs"),
    [
        ("9.0", ["sm_80", "sm_90"], True),
        ("8.6", ["sm_80"], True),  # a cubin runs on a newer minor of its major
        ("8.0", ["sm_86"], False),
        ("9.0", ["sm_80", "sm_86"], False),  # no cubin of major 9, no PTX
        ("12.0", ["sm_90", "compute_90"], True),  # PTX is JIT-compiled forward
        ("8.9", ["compute_90"], False),
        ("9.0", ["sm_90a"], True),
        ("9.0", ["sm_80", "sm_100a"], False),
        ("10.3", ["sm_100a"], False),  # arch-specific cubins run on one GPU only
        ("10.3", ["sm_100"], True),
        ("6.1", ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"], False),
        ("bogus", ["sm_80"], False),
    ],
)
def test_arch_supported(cc: str, arch: list[str], runs: bool) -> None:
    assert arch_supported(cc, arch) is runs


def test_bf16_needs_ampere() -> None:
    assert supports_bf16("8.0") and supports_bf16("12.0") and supports_bf16("9.0")
    assert not supports_bf16("7.5") and not supports_bf16("7.0") and not supports_bf16("")


def test_planned_arch_lists_cover_the_cuda_13_cut() -> None:
    cu130 = planned_arch_list("13.0")
    cu128 = planned_arch_list("12.8.1")
    assert cu130 is not None and cu128 is not None
    assert not arch_supported("7.0", cu130)  # CUDA 13 dropped Volta
    assert arch_supported("7.0", cu128)
    assert arch_supported("9.0", cu130) and arch_supported("12.0", cu130)
    assert planned_arch_list("99.9") is None and planned_arch_list(None) is None
