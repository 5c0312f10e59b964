"""Which stages build, how long and with what, said before anything is downloaded: `plan` and
`doctor` on the recorded 535 host (an A100: CUDA 12.2, so megatron's cu128 stack, whose
TransformerEngine extension builds from source), and on 580 and 590 hosts (cu130: every kernel
prebuilt), for megatron and fsdp.

The driver cannot run here: an nvidia-smi stand-in prints a recorded real `-q -x` output
(tests/data/nvidia/), on a PATH with no nvcc and no CUDA_HOME, as on a driver-only GPU node.
No 580 output is recorded there, so that host is the driver override a lab uses to plan for a
driver it does not run (VERL_BOOTSTRAP_CUDA_DRIVER=580.65.06).
"""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from scaffold import run, run_cli

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.kernels.sizing import read_resources
from verl_bootstrap.profile import load_profile

DATA = Path(__file__).parent / "data" / "nvidia"
HOSTS = {
    "535": "535.54.03-A100-SXM4-80GBx4-MIG-qx.xml",  # CUDA 12.2: cu128
    "580": None,  # no recorded output: the driver override
    "590": "590.44.01-RTXA5000x2-qx.xml",  # CUDA 13.1: cu130
}
HOST_NVCC = shutil.which("nvcc")


def driver_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, *, nvcc: bool = False
) -> None:
    """This process as a driver-only host of `host`'s driver: no toolkit unless `nvcc`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorded = HOSTS[host]
    if recorded is not None:
        smi = bin_dir / "nvidia-smi"
        smi.write_text(f'#!/bin/sh\n[ "$1" = -q ] && exec cat "{DATA / recorded}"\nexit 9\n')
        smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
        monkeypatch.delenv("VERL_BOOTSTRAP_CUDA_DRIVER", raising=False)
    else:
        monkeypatch.setenv("VERL_BOOTSTRAP_CUDA_DRIVER", "580.65.06")
    path = f"{bin_dir}:/usr/bin:/bin"
    if nvcc:
        assert HOST_NVCC is not None, "these machines ship a CUDA toolkit (nvcc), as CI's do"
        path = f"{Path(HOST_NVCC).parent}:{path}"
    monkeypatch.setenv("PATH", path)
    for name in ("CUDA_HOME", "CUDA_PATH", "VERL_BOOTSTRAP_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))


def plan_of(profile: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    """`plan --profile PROFILE`: its JSON steps by id, and its text."""
    ran = run_cli(["plan", "--profile", profile])
    assert ran.code == EXIT_OK, ran.err
    code, text, err = run(["plan", "--profile", profile], capsys)
    assert code == EXIT_OK, err
    return {s["id"]: s for s in ran.body["steps"]} | {"variant": ran.body["variant"]}, text


def step_text(text: str, step_id: str) -> str:
    """One step's lines of the text plan."""
    match = re.search(rf"^\d+\. {re.escape(step_id)} \[.*?(?=^\d+\. |\Z)", text, re.M | re.S)
    assert match is not None, step_id
    return match[0]


def te_minutes(max_jobs: int) -> int:
    """The plan's estimate for TransformerEngine's extension on this host: the profile's figure
    for 16 cores over the jobs it runs (its work does not grow with the architectures)."""
    stage = next(s for s in load_profile("megatron").stages if s.id == "transformer-engine")
    assert stage.kernel is not None and stage.kernel.build_minutes is not None
    assert stage.kernel.build_per_arch is False
    jobs = max(1, min(max_jobs, read_resources().cores))
    return round(stage.kernel.build_minutes * 16 / jobs)


def test_megatron_on_the_535_host_names_the_te_build_its_minutes_and_toolkit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    driver_host(tmp_path, monkeypatch, "535")
    steps, text = plan_of("megatron", capsys)
    assert steps["variant"] == "cu128"
    te = step_text(text, "transformer-engine")
    kernel = steps["transformer-engine"]["kernel"]
    assert kernel["source"] == "build" and kernel["builds"] is True
    minutes = te_minutes(kernel["max_jobs"])
    assert kernel["build_minutes"] == minutes
    assert f"\n   build: about {minutes} min on this host (the profile's " in te
    assert "it needs a CUDA 12.x toolkit (nvcc, from CUDA_HOME or PATH): none here" in te
    home = tmp_path / "home" / "wheelhouse"
    assert f"the wheel is kept in your wheelhouse {home}: a lab's shared one (`wheelhouse:`" in te
    # flash-attn comes prebuilt; what its fallback would cost is said, as a fallback
    flash = step_text(text, "flash-attn")
    assert steps["flash-attn"]["kernel"]["builds"] is False and "\n   build:" not in flash
    assert "its build variables apply only if it falls back to building from source: about " in (
        flash
    )
    assert "a CUDA 12.x toolkit (nvcc, from CUDA_HOME or PATH): none here" in flash
    assert [s for s in steps if s != "variant" and "\n   build:" in step_text(text, s)] == [
        "transformer-engine"
    ]


@pytest.mark.parametrize("host", ["535", "580", "590"])
@pytest.mark.parametrize("profile", ["megatron", "fsdp"])
def test_each_recorded_host_says_which_stages_build(
    host: str,
    profile: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    driver_host(tmp_path, monkeypatch, host)
    steps, text = plan_of(profile, capsys)
    variant = "cu128" if host == "535" else "cu130"
    assert steps["variant"] == variant
    kernels = {i: s["kernel"] for i, s in steps.items() if i != "variant" and "kernel" in s}
    builds = sorted(i for i, k in kernels.items() if k["builds"])
    expected = ["transformer-engine"] if (profile, host) == ("megatron", "535") else []
    assert builds == expected
    major = "12" if variant == "cu128" else "13"
    for stage_id, kernel in kernels.items():
        said = step_text(text, stage_id)
        assert ("\n   build: about " in said) == (stage_id in builds), said
        assert f"it needs a CUDA {major}.x toolkit (nvcc, from CUDA_HOME or PATH): none" in said
        assert kernel["build_minutes"] and kernel["build_minutes"] > 0


def test_a_toolkit_of_another_cuda_major_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    driver_host(tmp_path, monkeypatch, "535", nvcc=True)  # this host's nvcc: CUDA 13.0
    _, text = plan_of("megatron", capsys)
    te = step_text(text, "transformer-engine")
    need = r"it needs a CUDA 12\.x toolkit \(nvcc, from CUDA_HOME or PATH\): nvcc 13\.\d+ \("
    assert re.search(need, te), te
    assert "is another CUDA major, across which torch builds no extension" in te


def test_a_lab_wheelhouse_is_named_where_the_build_is_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    driver_host(tmp_path, monkeypatch, "535")
    site = tmp_path / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {tmp_path / 'lab'}\n")
    monkeypatch.setenv("VERL_BOOTSTRAP_CONFIG", str(site))
    _, text = plan_of("megatron", capsys)
    te = step_text(text, "transformer-engine")
    assert f"the wheel is published to the lab wheelhouse {tmp_path / 'lab'}: later nodes" in te


def _doctor(profile: str) -> dict[str, dict[str, Any]]:
    ran = run_cli(["doctor", "--profile", profile, "--skip-check", "network"])
    return {c["name"]: c for c in ran.body["checks"]}


def test_doctor_on_the_535_host_names_the_te_build_its_minutes_and_the_way_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver_host(tmp_path, monkeypatch, "535")
    steps = {s["id"]: s for s in run_cli(["plan", "--profile", "megatron"]).body["steps"]}
    kernel = steps["transformer-engine"]["kernel"]
    checks = _doctor("megatron")
    tools = checks["build-tools"]
    assert tools["status"] == "fail", tools
    assert tools["finding"].startswith("no nvcc (CUDA_HOME or PATH) for CUDA 12.8 builds")
    minutes = te_minutes(kernel["max_jobs"])
    assert (
        f"(for transformer-engine: no prebuilt wheel for this env, so a source build of about "
        f"{minutes} min on this host)" in tools["finding"]
    )
    assert "cuda-toolkit=12.8" in tools["fix"]
    assert "take the wheel from a lab wheelhouse (`wheelhouse:` in the site config)" in tools["fix"]
    assert "`verl-bootstrap wheelhouse add`" in tools["fix"]
    # the RAM check counts the jobs the plan sized, not the profile's MAX_JOBS
    assert checks["ram"]["data"]["jobs"] == kernel["max_jobs"]


@pytest.mark.parametrize("host", ["580", "590"])
def test_doctor_on_a_cu130_host_needs_no_toolkit_for_megatron(
    host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver_host(tmp_path, monkeypatch, host)
    tools = _doctor("megatron")["build-tools"]
    assert tools["status"] == "ok", tools
    assert tools["finding"].startswith(
        "no CUDA toolkit needed: flash-attn takes a prebuilt wheel (verl-wheelhouse), "
        "transformer-engine takes a prebuilt wheel (verl-wheelhouse)"
    )
