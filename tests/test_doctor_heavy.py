"""Doctor inside a real CUDA torch env on a host without a GPU (several GB: `make test-heavy`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from verl_bootstrap.plan.doctor import DoctorInputs, Status, run_doctor
from verl_bootstrap.plan.doctor.checks_env import find_uv, installed_versions
from verl_bootstrap.plan.doctor.results import CheckResult

pytestmark = pytest.mark.heavy
REAL_SO = Path("/lib/x86_64-linux-gnu/libz.so.1").resolve()


@pytest.fixture(scope="module")
def torch_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with torch from the configured index (a CUDA build: it brings its own CUDA libs)."""
    prefix = tmp_path_factory.mktemp("torch-env") / "env"
    uv = find_uv()
    assert uv is not None
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(prefix)], check=True)
    python = str(prefix / "bin" / "python")
    subprocess.run([uv, "pip", "install", "-q", "--python", python, "torch"], check=True)
    return prefix


def _loaded(prefix: Path, environ: dict[str, str]) -> CheckResult:
    inputs = DoctorInputs(prefix=prefix, environ=environ)
    return run_doctor(inputs, only=["shadowing-loaded"]).checks[0]


def test_torchs_own_cuda_libraries_load_from_inside_the_env(torch_env: Path) -> None:
    result = _loaded(torch_env, dict(os.environ))
    torch = result.data["torch"]
    if not torch.get("cuda"):
        pytest.skip(f"the index served a CPU torch ({torch.get('version')}): no CUDA libs to load")
    assert result.status is Status.OK, result.finding
    names = {x["name"] for x in result.data["loaded"]}
    assert any(n.startswith("libcudnn") for n in names)
    assert all(x["inside_prefix"] for x in result.data["loaded"])
    assert torch["arch_list"]
    # PyPI's CUDA torch says "2.15.0" in its metadata and "2.15.0+cu132" in torch.__version__.
    installed = Version(installed_versions(torch_env)["torch"])
    assert installed.public == Version(torch["version"]).public


def test_a_preloaded_foreign_cudnn_shadows_the_wheels_copy(torch_env: Path, tmp_path: Path) -> None:
    cudnn = tmp_path / "libcudnn.so.9"
    shutil.copy(REAL_SO, cudnn)
    result = _loaded(torch_env, {**os.environ, "LD_PRELOAD": str(cudnn)})
    assert result.status is Status.FAIL
    assert f"libcudnn.so.9 from {cudnn}" in result.finding
