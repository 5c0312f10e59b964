"""A CUDA toolkit is asked for only where the plan builds from source: a recorded 590 host (a
driver, no nvcc, no CUDA_HOME) passes the toolkit check for fsdp, whose flash-attn comes prebuilt;
a site config that turns every prebuilt source off, or a profile whose script compiles, still
asks for nvcc, naming the stage. A kernel stage that falls back to a build at run time checks
for the toolkit then, against this host's real nvcc.

The driver cannot run here: an nvidia-smi stand-in prints a recorded real `-q -x` output.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from scaffold import run_cli

from verl_bootstrap.errors import EXIT_OK, StepFailed
from verl_bootstrap.kernels.toolkit import find_nvcc, require_toolkit
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.doctor import Status
from verl_bootstrap.plan.doctor.preflight import run_preflight_checks
from verl_bootstrap.run.installrun import prepare_plan

RECORDED = Path(__file__).parent / "data" / "nvidia" / "590.44.01-RTXA5000x2-qx.xml"
HOST_NVCC = shutil.which("nvcc")


@pytest.fixture
def driver_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a driver-only 590 host: an nvidia-smi printing the recorded output on a
    PATH with no nvcc, and no CUDA_HOME."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\n[ "$1" = -q ] && exec cat "{RECORDED}"\nexit 9\n')
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    for name in ("CUDA_HOME", "CUDA_PATH", "VERL_BOOTSTRAP_CUDA_DRIVER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))
    assert find_nvcc({"PATH": f"{bin_dir}:/usr/bin:/bin"}) is None
    return tmp_path


def _cli(*argv: str) -> tuple[int, dict[str, Any]]:
    ran = run_cli(list(argv))
    return ran.code, ran.body


def _doctor(*argv: str) -> dict[str, dict[str, Any]]:
    _, body = _cli("doctor", *argv, "--skip-check", "network")
    return {c["name"]: c for c in body["checks"]}


def test_doctor_fsdp_on_a_driver_only_host_needs_no_toolkit(driver_only: Path) -> None:
    checks = _doctor("--profile", "fsdp")
    assert checks["driver-vs-plan"]["status"] == "ok", checks["driver-vs-plan"]
    assert checks["driver-vs-plan"]["data"]["name"] == "cu130"
    tools = checks["build-tools"]
    assert tools["status"] == "ok", tools
    assert tools["finding"].startswith("no CUDA toolkit needed: flash-attn takes a prebuilt wheel")
    assert tools["data"] == {"prebuilt": {"flash-attn": "verl-wheelhouse"}}  # no nvcc asked for
    assert checks["ram"]["status"] == "skipped"  # nothing compiles, so no MAX_JOBS to size


@pytest.mark.parametrize("route", [[], ["--resolve"]])
def test_plan_fsdp_on_a_driver_only_host_passes_the_toolkit_check(
    driver_only: Path, route: list[str]
) -> None:
    code, body = _cli("plan", "--profile", "fsdp", *route)
    assert code == EXIT_OK
    kernel = next(s for s in body["steps"] if s["id"] == "flash-attn")["kernel"]
    assert kernel["source"] != "build", kernel
    # the install's own preflight of the same plan (the driver read from the host, as install does)
    options = RunOptions(profile="fsdp", prefix=driver_only / "env", resolve=bool(route))
    plan = prepare_plan(options, check_optional=False)
    assert plan.variant == "cu130"
    tools = next(c for c in run_preflight_checks(plan) if c.name == "build-tools")
    assert tools.status is Status.OK, tools
    assert tools.data["prebuilt"] == {"flash-attn": kernel.get("origin") or kernel["source"]}


def test_a_site_config_forcing_a_source_build_asks_for_nvcc(
    driver_only: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = driver_only / "site.yaml"
    site.write_text(
        f"schema_version: 1\nwheelhouse: {driver_only / 'house'}\nkernel_sources: [wheelhouse]\n"
    )
    monkeypatch.setenv("VERL_BOOTSTRAP_CONFIG", str(site))  # only the lab's own wheelhouse, empty
    tools = _doctor("--profile", "fsdp")["build-tools"]
    assert tools["status"] == "fail", tools
    assert tools["data"]["nvcc"] is None and tools["data"]["stages"] == ["flash-attn"]
    assert tools["fix"] and "cuda-toolkit=13.0" in tools["fix"]


def test_a_profile_whose_script_compiles_asks_for_nvcc(driver_only: Path) -> None:
    tools = _doctor("--profile", "fsdp-script")["build-tools"]
    assert tools["status"] == "fail", tools
    assert tools["data"]["stages"] == ["install-script"]


def test_a_fallback_build_without_a_toolkit_is_refused_naming_the_stage(tmp_path: Path) -> None:
    empty = {"PATH": str(tmp_path)}
    with pytest.raises(StepFailed) as caught:
        require_toolkit("flash-attn", "flash-attn", "13.0", empty)
    message = caught.value.message
    assert message.startswith("stage flash-attn: no prebuilt flash-attn wheel was taken")
    assert "falls back to a source build" in message and "no nvcc" in message
    assert caught.value.hint and "CUDA_HOME" in caught.value.hint
    require_toolkit("standin", "standin-kernel", "cpu", empty)  # a CPU torch builds without one


def test_a_fallback_build_checks_the_real_nvcc_against_torchs_cuda() -> None:
    assert HOST_NVCC is not None, "these machines ship a CUDA toolkit (nvcc) on PATH, as CI's do"
    nvcc = find_nvcc({"PATH": str(Path(HOST_NVCC).parent)})
    assert nvcc is not None
    environ = {"PATH": str(Path(HOST_NVCC).parent)}
    require_toolkit("flash-attn", "flash-attn", nvcc.release, environ)  # the same CUDA: builds
    other = "12.8" if not nvcc.release.startswith("12.") else "13.0"
    with pytest.raises(StepFailed, match="across CUDA majors"):
        require_toolkit("flash-attn", "flash-attn", other, environ)
    home = {"PATH": "", "CUDA_HOME": str(Path(HOST_NVCC).parents[1])}
    if (Path(home["CUDA_HOME"]) / "bin" / "nvcc").exists():  # CUDA_HOME is looked at first
        assert find_nvcc(home) is not None
