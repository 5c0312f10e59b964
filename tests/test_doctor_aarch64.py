"""doctor and the plan on an aarch64 (Grace-Hopper/Grace-Blackwell) host, fed that host's facts:
its machine and glibc as a report from such a node gives them, and a Hopper GPU from a recorded
real nvidia-smi table. This x86 machine stands in for the node only through those inputs."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from nvidiatext import parse_smi_table

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.installing.prepare import prepare_locked
from verl_bootstrap.machine.gpu.cuda import known_compute_capability, planned_arch_list
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.doctor import DoctorInputs, run_doctor
from verl_bootstrap.plan.doctor.results import CheckResult, Status
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import Profile

DATA = Path(__file__).parent / "data" / "nvidia"
LOCKFILES = Path(__file__).resolve().parents[1] / "lockfiles"
GPU = Profile.model_validate(
    {
        "schema_version": 1,
        "name": "fsdp",
        "cuda_variants": {"cu130": {}},
        "stages": [{"id": "install-verl", "kind": "install-verl"}],
    }
)


def _aarch64(**extra: object) -> dict[str, CheckResult]:
    """doctor's machine and GPU checks for a GH200-like node: aarch64, glibc 2.35, an H100."""
    driver = parse_smi_table((DATA / "590.48.01-H100-table.txt").read_text(encoding="utf-8"))
    inputs = DoctorInputs(
        profile=GPU,
        variant="cu130",
        machine="aarch64",
        glibc="2.35",
        driver=driver,
        detect=False,
        environ={},
        **extra,  # type: ignore[arg-type]
    )
    report = run_doctor(inputs, only=("driver", "gpu-vs-build", "glibc", "platform"))
    return {c.name: c for c in report.checks}


def test_doctor_names_the_aarch64_host_its_glibc_wheel_tags_and_the_gpus_arch() -> None:
    checks = _aarch64()
    assert all(c.status is Status.OK for c in checks.values()), checks
    assert "aarch64 host (linux-aarch64)" in checks["platform"].finding
    assert "manylinux_2_35_aarch64" in checks["platform"].finding
    assert "glibc 2.35 on aarch64 runs PyTorch's aarch64 wheels" in checks["glibc"].finding
    assert "NVIDIA H100 80GB HBM3, 80 GiB, cc 9.0" in checks["driver"].finding
    build = checks["gpu-vs-build"]
    assert "cc 9.0 run PyTorch's CUDA 13.0 wheels for linux-aarch64" in build.finding
    assert build.data["arch_list"] == list(planned_arch_list("13.0", "linux-aarch64") or ())


def test_a_lock_and_wheels_for_x86_64_are_named_plainly_on_an_aarch64_host() -> None:
    checks = _aarch64(lock_platform="linux-64", wheel_tags=("any", "manylinux_2_28_x86_64"))
    result = checks["platform"]
    assert result.status is Status.FAIL
    assert result.data["lock_platform"] == "linux-64" and result.data["platform"] == "linux-aarch64"
    assert result.data["foreign_tags"] == ["manylinux_2_28_x86_64"]
    assert result.fix and "lock --platform linux-aarch64" in result.fix
    too_old = _aarch64(wheel_tags=("manylinux_2_39_aarch64",))["glibc"]
    assert too_old.status is Status.FAIL
    assert too_old.data["required"] == "2.39" and too_old.data["host"] == "2.35"


def test_grace_superchips_have_their_gpus_compute_capability() -> None:
    assert known_compute_capability("NVIDIA GH200 480GB") == "9.0"
    assert known_compute_capability("NVIDIA GB200") == "10.0"
    assert known_compute_capability("NVIDIA GeForce RTX 4080 SUPER") is None
    x86, arm = planned_arch_list("13.0"), planned_arch_list("13.0", "linux-aarch64")
    assert x86 and arm and "sm_75" in x86 and "sm_75" not in arm and "sm_110" in arm


def test_the_plan_on_an_aarch64_host_picks_the_aarch64_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = RunOptions(profile="fsdp", prefix=tmp_path / "env", cuda="cu130")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    _, locked = prepare_locked(load_profile("fsdp"), options, "cu130")
    assert locked.path == LOCKFILES / "fsdp" / "cu130-linux-aarch64.lock.yaml"
    assert locked.lock.platform == "linux-aarch64"
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    _, locked = prepare_locked(load_profile("fsdp"), options, "cu130")
    assert locked.path.name == "cu130-linux-64.lock.yaml"


def test_a_lock_for_another_platform_is_refused_naming_both(tmp_path: Path) -> None:
    aarch64 = LOCKFILES / "fsdp" / "cu130-linux-aarch64.lock.yaml"
    options = RunOptions(profile="fsdp", prefix=tmp_path / "env", cuda="cu130", lockfile=aarch64)
    with pytest.raises(InputError) as refused:
        prepare_locked(load_profile("fsdp"), options, "cu130")
    assert "is for linux-aarch64 (aarch64 wheels); this machine is linux-64 (x86_64)" in str(
        refused.value.message
    )
    assert refused.value.hint and "lock --platform linux-64" in refused.value.hint
