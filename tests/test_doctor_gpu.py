"""Doctor's GPU checks, fed drivers and GPUs read from recorded real outputs."""

from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from nvidiatext import parse_query_csv, parse_smi_table

from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.gpu.smiparse import parse_smi_xml
from verl_bootstrap.plan.doctor import DoctorInputs, run_doctor
from verl_bootstrap.plan.doctor.checks_gpu import (
    check_driver,
    check_driver_vs_plan,
    check_gpu_vs_build,
    check_visibility,
)
from verl_bootstrap.plan.doctor.inputs import Context
from verl_bootstrap.plan.doctor.results import Status
from verl_bootstrap.profile.models import Profile

DATA = Path(__file__).parent / "data" / "nvidia"


def _profile(variants: dict[str, Any], *, bf16: bool = True) -> Profile:
    return Profile.model_validate(
        {
            "schema_version": 1,
            "name": "fsdp",
            "stages": [{"id": "install-verl", "kind": "install-verl"}],
            "cuda_variants": variants,
            "verify": {"bf16": bf16},
        }
    )


GPU = _profile({"cu126": {}, "cu130": {}})


def _driver(name: str) -> DriverInfo:
    text = (DATA / name).read_text(encoding="utf-8")
    if name.endswith(".xml"):
        info = parse_smi_xml(text)
    elif name.endswith("-csv.txt"):
        info = parse_query_csv(text)
    else:
        info = parse_smi_table(text)
    assert info is not None
    return info


def _gt1030() -> DriverInfo:
    # `-q -x` does not report compute capability; the GT 1030's is 6.1 (NVIDIA's CUDA GPU table).
    info = _driver("470.74-GT1030-qx.xml")
    return replace(info, gpus=(replace(info.gpus[0], compute_capability="6.1"),))


def _ctx(driver: DriverInfo | None, variant: str | None = "cu130", **inputs: Any) -> Context:
    fields: dict[str, Any] = {"profile": GPU, "variant": variant, "environ": {}, **inputs}
    return Context(inputs=DoctorInputs(**fields), driver=driver, env=None)


def test_driver_finding_names_version_cuda_source_and_gpus() -> None:
    result = check_driver(_ctx(_driver("590.48.01-H200-table.txt")))
    assert result.status is Status.OK
    assert "driver 590.48.01 serving CUDA 13.1 (from nvidia-smi)" in result.finding
    assert "NVIDIA H200, 140 GiB" in result.finding


def test_edited_a100_output_warns_about_gpus_the_driver_does_not_describe() -> None:
    result = check_driver(_ctx(_driver("535.54.03-A100-SXM4-80GBx4-MIG-qx.xml")))
    assert result.status is Status.WARN
    assert result.data["attached"] == 4 and len(result.data["gpus"]) == 1
    assert result.fix and "Xid 79" in result.fix


def test_no_driver_fails_a_gpu_plan_but_not_a_cpu_one() -> None:
    unplanned = check_driver(_ctx(None, variant=None))
    assert unplanned.status is Status.FAIL and unplanned.data == {"source": None}
    assert "nvcc" in unplanned.finding  # says why a toolkit does not count
    assert check_driver(_ctx(None, variant="cu130")).status is Status.WARN
    assert check_driver(_ctx(None, variant="cpu")).status is Status.OK
    assert check_driver(_ctx(None, profile=None, variant=None)).status is Status.WARN


def test_driver_vs_plan_passes_and_names_the_newest_variant() -> None:
    result = check_driver_vs_plan(_ctx(_driver("595.80-L40S-table.txt")))
    assert result.status is Status.OK
    assert result.data["name"] == "cu130" and result.data["served"][-1] == "cu130"


def test_driver_vs_plan_fails_a_12x_driver_for_cu130_with_the_way_out() -> None:
    result = check_driver_vs_plan(_ctx(_driver("570.124.04-RTX3060-qx.xml")))
    assert result.status is Status.FAIL
    assert result.data["name"] == "cu130" and result.data["min_driver"] == "580"
    assert result.fix and "--cuda cu126" in result.fix
    assert result.data["served"] == ["cu126"]


def test_driver_vs_plan_skips_without_a_driver_or_plan() -> None:
    assert check_driver_vs_plan(_ctx(None)).status is Status.SKIPPED
    assert check_driver_vs_plan(_ctx(_driver("595.80-L40S-table.txt"), variant=None)).status is (
        Status.SKIPPED
    )
    assert check_driver_vs_plan(_ctx(None, variant="cpu")).status is Status.OK


def test_gpu_vs_build_accepts_recorded_h100_and_l40s() -> None:
    for name in ("590.48.01-H100-MIG-csv.txt", "595.80-L40S-csv.txt"):
        result = check_gpu_vs_build(_ctx(_driver(name)))
        assert result.status is Status.OK, result.finding
        assert result.data["bf16_required"] is True
        assert result.data["outside_arch"] == result.data["no_bf16"] == []


def test_gpu_vs_build_fails_bf16_on_a_turing_card() -> None:
    result = check_gpu_vs_build(_ctx(_driver("610.57.04-RTX2080S-csv.txt")))
    assert result.status is Status.FAIL
    assert result.data["no_bf16"] == [0] and result.data["outside_arch"] == []
    assert result.fix and "verify.bf16: false" in result.fix
    relaxed = _ctx(
        _driver("610.57.04-RTX2080S-csv.txt"), profile=_profile({"cu130": {}}, bf16=False)
    )
    assert check_gpu_vs_build(relaxed).status is Status.OK


def test_gpu_vs_build_fails_a_pascal_card_on_cuda_13_and_offers_cu126() -> None:
    result = check_gpu_vs_build(_ctx(_gt1030()))
    assert result.status is Status.FAIL
    assert result.data["outside_arch"] == [0]
    assert result.data["arch_source"] == "PyTorch's CUDA 13.0 wheels"
    assert result.fix and "--cuda cu126" in result.fix


def test_gpu_vs_build_only_looks_at_visible_gpus() -> None:
    hidden = _ctx(_driver("610.57.04-RTX2080S-csv.txt"), environ={"CUDA_VISIBLE_DEVICES": ""})
    assert check_gpu_vs_build(hidden).status is Status.SKIPPED


def test_gpu_vs_build_warns_when_compute_capability_is_unknown() -> None:
    # the plain table reports no compute capability; an RTX 4080's is not known by its name
    result = check_gpu_vs_build(_ctx(_driver("595.71.05-RTX4080S-table.txt")))
    assert result.status is Status.WARN and result.data == {"unknown": [0]}


def test_visibility_reports_ordinals_and_ray() -> None:
    ctx = _ctx(_driver("590.44.01-RTXA5000x2-qx.xml"), environ={"CUDA_VISIBLE_DEVICES": "1"})
    result = check_visibility(ctx)
    assert result.status is Status.OK
    assert [(d["gpu_index"], d["ordinal"]) for d in result.data["devices"]] == [(1, 0)]
    assert "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES" in result.data["ray"]


def _fake_smi(tmp_path: Path, xml: str) -> str:
    """An nvidia-smi stand-in printing a recorded `-q -x` output (and failing anything else)."""
    script = tmp_path / "nvidia-smi"
    script.write_text(f'#!/bin/sh\n[ "$1" = -q ] && exec cat "{DATA / xml}"\nexit 9\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_visibility_end_to_end_warns_on_an_entry_matching_no_gpu(tmp_path: Path) -> None:
    inputs = DoctorInputs(
        root=tmp_path,
        environ={"CUDA_VISIBLE_DEVICES": "1,7,0"},
        use_nvml=False,
        nvidia_smi=_fake_smi(tmp_path, "590.44.01-RTXA5000x2-qx.xml"),
    )
    result = run_doctor(inputs, only=["visibility"]).checks[0]
    assert result.status is Status.WARN
    assert [(d["gpu_index"], d["ordinal"]) for d in result.data["devices"]] == [(1, 0)]
    assert len(result.data["warnings"]) == 1
    assert result.data["ignored"] == ["7", "0"]
    assert result.fix and "indices 0..1" in result.fix
