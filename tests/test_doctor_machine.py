"""Doctor's machine checks against this machine's real disk, RAM, glibc, Python, user and tools."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from verl_bootstrap.plan.doctor import DoctorInputs, Status, run_doctor
from verl_bootstrap.plan.doctor.checks_machine import GIB, PIP_SHARE, host_glibc, manylinux_glibc
from verl_bootstrap.plan.doctor.results import CheckResult
from verl_bootstrap.profile.models import Profile

HOST_PYTHON = ".".join(str(n) for n in sys.version_info[:3])
NVCC = shutil.which("nvcc")


def _profile(**fields: Any) -> Profile:
    stages = [{"id": "install-verl", "kind": "install-verl"}, *fields.pop("stages", [])]
    return Profile.model_validate({"schema_version": 1, "name": "fsdp", "stages": stages, **fields})


def _check(name: str, **inputs: Any) -> CheckResult:
    fields: dict[str, Any] = {"environ": {"PATH": os.environ.get("PATH", "")}, **inputs}
    return run_doctor(DoctorInputs(**fields), only=[name]).checks[0]


FLASH_ATTN = {"id": "flash-attn", "packages": ["flash-attn==2.8.3"], "no_build_isolation": True}


def _disk(tmp_path: Path, disk_gb: float, **fields: Any) -> CheckResult:
    profile = _profile(disk_gb=disk_gb, **fields)
    caches = (("uv", tmp_path / "uv"), ("pip", tmp_path / "pip"), ("rattler", tmp_path / "rattler"))
    return _check("disk", profile=profile, prefix=tmp_path / "env", cache_dirs=caches)


def test_disk_is_measured_where_the_prefix_and_caches_will_be(tmp_path: Path) -> None:
    result = _disk(tmp_path, 0.01, env={"backend": "venv"})
    assert result.status is Status.OK
    (row,) = result.data["filesystems"]  # prefix and uv's cache share tmp_path's filesystem
    assert row["paths"] == (str(tmp_path / "env"), str(tmp_path / "uv"))
    # uv hardlinks from its cache into the env: on one filesystem they take the env's size once
    assert row["need_gb"] == pytest.approx(0.01)


def test_disk_counts_the_caches_the_backend_and_stages_use(tmp_path: Path) -> None:
    script = [{"id": "script", "kind": "script", "script": "scripts/install.sh"}]
    result = _disk(tmp_path, 0.01, env={"backend": "conda"}, stages=script)
    (row,) = result.data["filesystems"]
    assert row["paths"] == tuple(str(tmp_path / n) for n in ("env", "uv", "rattler", "pip"))
    # pip's cache holds wheel archives, which are copied, not linked, into the env
    assert row["need_gb"] == pytest.approx(0.01 * (1 + PIP_SHARE))


def test_a_cache_on_another_filesystem_needs_room_of_its_own(tmp_path: Path) -> None:
    other = Path("/proc")  # procfs: on Linux, always a filesystem of its own
    profile = _profile(disk_gb=0.01, env={"backend": "venv"})
    caches = (("uv", other / "vb-uv-cache"),)
    result = _check("disk", profile=profile, prefix=tmp_path / "env", cache_dirs=caches)
    by_path = {row["paths"]: row["need_gb"] for row in result.data["filesystems"]}
    assert by_path[(str(other / "vb-uv-cache"),)] == pytest.approx(0.01)
    assert by_path[(str(tmp_path / "env"),)] == pytest.approx(0.01)


def test_disk_fails_when_the_profile_does_not_fit(tmp_path: Path) -> None:
    result = _disk(tmp_path, 10**9)
    assert result.status is Status.FAIL
    assert result.fix and "--prefix" in result.fix and "UV_CACHE_DIR" in result.fix


def test_disk_warns_when_space_is_tight(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free / GIB
    result = _disk(tmp_path, free * 0.9, env={"backend": "venv"})
    assert result.status is Status.WARN
    (row,) = result.data["filesystems"]
    assert row["need_gb"] <= row["free_gb"]  # it fits, with little to spare


def _available_gib() -> float:
    text = Path("/proc/meminfo").read_text()
    match = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE)
    assert match
    return int(match[1]) / 1024**2


def test_ram_is_compared_with_the_build_parallelism() -> None:
    small = _profile(stages=[{**FLASH_ATTN, "env": {"MAX_JOBS": "1"}}])
    assert _check("ram", profile=small).status is Status.OK
    huge = _profile(stages=[{**FLASH_ATTN, "env": {"MAX_JOBS": "100000"}}])
    result = _check("ram", profile=huge)
    assert result.status is Status.WARN
    jobs = re.match(r"export MAX_JOBS=(\d+) before installing", result.fix or "")
    assert jobs and abs(int(jobs[1]) - _available_gib() // 4) <= 1


def test_ram_counts_verls_script_as_32_jobs_and_skips_without_builds(tmp_path: Path) -> None:
    script = _profile(stages=[{"id": "engines", "kind": "script", "script": "scripts/x.sh"}])
    assert _check("ram", profile=script).data["jobs"] == 32
    assert _check("ram", profile=_profile()).status is Status.SKIPPED
    blind = _check("ram", profile=script, root=tmp_path)  # no /proc/meminfo under this root
    assert blind.status is Status.WARN
    assert blind.data == {"available_gib": None, "jobs": 32, "stages": ["engines"]}


def test_manylinux_tags_map_to_glibc() -> None:
    assert manylinux_glibc("manylinux_2_28_x86_64") == (2, 28)
    assert manylinux_glibc("manylinux2014_x86_64") == (2, 17)
    assert manylinux_glibc("manylinux1_x86_64") == (2, 5)
    assert manylinux_glibc("linux_x86_64") is None


def test_glibc_of_this_host_against_the_wheels() -> None:
    have = host_glibc()
    assert have is not None and have >= (2, 17)
    assert _check("glibc", wheel_tags=("manylinux2014_x86_64",)).status is Status.OK
    too_new = _check("glibc", wheel_tags=("manylinux_2_99_x86_64",))
    assert too_new.status is Status.FAIL
    assert too_new.data["required"] == "2.99" and too_new.data["host"] == f"{have[0]}.{have[1]}"
    assert too_new.fix and "Apptainer" in too_new.fix


def test_python_range_with_this_interpreter() -> None:
    inside = _profile(env={"backend": "venv"}, python={"requires": ">=3.10,<3.99"})
    result = _check("python", profile=inside, python=Path(sys.executable))
    assert result.status is Status.OK and HOST_PYTHON in result.finding
    outside = _profile(env={"backend": "venv"}, python={"requires": ">=3.99", "prefer": "3.99"})
    result = _check("python", profile=outside)
    assert result.status is Status.FAIL
    assert result.fix and "uv python install 3.99" in result.fix


def test_conda_profiles_bring_their_own_python() -> None:
    result = _check("python", profile=_profile(env={"backend": "conda"}))
    assert result.status is Status.OK
    assert result.data["backend"] == "conda" and result.data["prefer"] == "3.12"


def test_root_is_reported_as_it_is() -> None:
    result = _check("root")
    assert result.status is (Status.WARN if os.geteuid() == 0 else Status.OK)
    assert result.data["uid"] == os.geteuid() and result.data["docker"]  # reported, not needed


def test_build_tools_without_nvcc_or_compiler_fail() -> None:
    profile = _profile(stages=[FLASH_ATTN], cuda_variants={"cu130": {}})
    result = _check("build-tools", profile=profile, variant="cu130", environ={"PATH": ""})
    assert result.status is Status.FAIL
    assert result.data["nvcc"] is None and result.data["cxx"] is None
    assert result.fix and "--installpath=$HOME/cuda-13.0" in result.fix
    assert _check("build-tools", profile=_profile()).status is Status.SKIPPED


@pytest.mark.skipif(NVCC is None, reason="needs a CUDA toolkit (nvcc) on PATH")
def test_build_tools_compare_nvcc_with_the_wheels_cuda() -> None:
    assert NVCC is not None
    out = subprocess.run([NVCC, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"release (\d+)\.(\d+)", out)
    assert match
    same, other = f"cu{match[1]}{match[2]}", "cu128" if match[1] != "12" else "cu130"
    variants: dict[str, dict[str, str]] = {same: {}, other: {}}
    profile = _profile(stages=[FLASH_ATTN], cuda_variants=variants)
    assert _check("build-tools", profile=profile, variant=same).status is Status.OK
    result = _check("build-tools", profile=profile, variant=other)
    assert result.status is Status.FAIL and "across CUDA majors" in result.finding
