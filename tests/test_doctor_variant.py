"""`--cuda auto` and explicit variants, against drivers read from recorded real outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nvidiatext import parse_smi_table

from verl_bootstrap.errors import InputError, Refused
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.gpu.smiparse import parse_smi_xml
from verl_bootstrap.profile.models import CudaVariant, Profile
from verl_bootstrap.profile.variants import choose_variant, variant_window

DATA = Path(__file__).parent / "data" / "nvidia"


def _profile(variants: dict[str, Any]) -> Profile:
    return Profile.model_validate(
        {
            "schema_version": 1,
            "name": "fsdp",
            "stages": [{"id": "install-verl", "kind": "install-verl"}],
            "cuda_variants": variants,
        }
    )


def _driver(name: str) -> DriverInfo:
    text = (DATA / name).read_text(encoding="utf-8")
    info = parse_smi_xml(text) if name.endswith(".xml") else parse_smi_table(text)
    assert info is not None
    return info


GPU = _profile({"cu128": {"cuda": "12.8"}, "cu130": {"cuda": "13.0", "min_driver": "580"}})


def test_auto_picks_the_newest_variant_the_driver_runs() -> None:
    name, reason = choose_variant(GPU, _driver("590.48.01-H200-table.txt"), "auto")
    assert name == "cu130"
    assert "590.48.01" in reason and "newest" in reason


def test_a_12x_driver_gets_the_12x_variant_and_hears_why_not_13() -> None:
    name, reason = choose_variant(GPU, _driver("570.124.04-RTX3060-qx.xml"), "auto")
    assert name == "cu128"
    assert "cu130 needs driver >= 580" in reason


def test_max_driver_is_exclusive() -> None:
    capped = _profile({"cu126": {"cuda": "12.6", "max_driver": "570"}, "cu128": {}})
    name, _ = choose_variant(capped, _driver("570.124.04-RTX3060-qx.xml"), "auto")
    assert name == "cu128"
    name, _ = choose_variant(capped, _driver("535.104.12-H100-MIG-table.txt"), "auto")
    assert name == "cu128"  # both run on 535; cu128 is newer


def test_a_driver_too_old_for_every_variant_is_refused() -> None:
    with pytest.raises(Refused, match="runs none") as caught:
        choose_variant(GPU, _driver("515.105.01-T4-qx.xml"), "auto")
    needs = {w["name"]: w["min_driver"] for w in caught.value.data["windows"]}
    assert caught.value.data["driver"] == "515.105.01" and needs["cu128"] == "525"


def test_no_driver_and_auto_is_refused_with_both_ways_out() -> None:
    with pytest.raises(Refused) as caught:
        choose_variant(GPU, None, "auto")
    assert caught.value.data == {"profile": GPU.name, "driver": None}
    assert caught.value.hint is not None
    assert "--profile cpu" in caught.value.hint and "--cuda cu" in caught.value.hint


def test_cpu_only_profile_needs_no_driver() -> None:
    cpu = _profile({"cpu": {}})
    assert choose_variant(cpu, None, "auto")[0] == "cpu"


def test_explicit_variant_is_taken_as_asked_or_refused_when_unknown() -> None:
    assert choose_variant(GPU, None, "cu130") == ("cu130", "cu130 was asked for with --cuda")
    with pytest.raises(InputError, match="no such variant"):
        choose_variant(GPU, None, "cu999")


def test_variant_window_derives_cuda_and_minimum_driver() -> None:
    window = variant_window("cu128", CudaVariant())
    assert (window.cuda, window.min_driver, window.max_driver) == ("12.8", "525", None)
    assert window.admits("525.147.05") and not window.admits("520.61")
