"""Heavy tier: the wheelhouse loop with a real CUDA extension (tests/data/kernels/cudastandin),
compiled by nvcc against the cu130 torch of the default index for one architecture. No GPU is
needed: the CUDA 13.0 toolkit comes as NVIDIA's wheels in the env (several GB; uv's cache makes
the second env cheap). Run: `.venv/bin/pytest -m heavy tests/test_kernels_cuda_heavy.py`."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kernellab import CUDA_STANDIN, lab_environment, make_sdist
from scaffold import Run, run_cli

from verl_bootstrap.kernels.wheelhouse import Wheelhouse

pytestmark = pytest.mark.heavy

PROFILE = Path(__file__).parent / "data" / "profiles" / "kernel-stage-cuda" / "profile.yaml"
KEY = "torch 2.11.0+cu130, cp311, cxx11abi, linux_x86_64"


def install(prefix: Path, repo: Path) -> Run:
    """The CUDA kernel-stage profile into `prefix`, for compute capability 9.0 only. The disk
    check is skipped (it is not what is tested): uv hardlinks the GBs of CUDA wheels from its
    cache, so an env costs little disk where the preflight counts the full size."""
    argv = ["install", "--profile", str(PROFILE), "--prefix", str(prefix), "--skip-check", "disk"]
    return run_cli([*argv, "--verl-source", str(repo), "--cuda", "cu130", "--cuda-arch", "9.0"])


def assert_kernel_answers(run: Run, prefix: Path) -> None:
    """The stage is done and the compiled module runs its host code (a CPU tensor is refused by
    the kernel's own check: the call reached the extension, no GPU needed)."""
    assert run.step("cuda-standin")["status"] == "done", run.step("cuda-standin")
    code = (
        "import torch, cuda_standin\n"
        "try:\n    cuda_standin.scale_add(torch.ones(2), torch.ones(2), 2.0)\n"
        "except RuntimeError as exc:\n    print(exc)\n"
    )
    python = prefix / "bin" / "python"
    answer = subprocess.run([python, "-c", code], check=False, capture_output=True, text=True)
    assert "scale_add: x and y must be CUDA tensors" in answer.stdout, answer.stderr
    reason = run.step("verify")["reason"]  # verl itself went in with no dependencies
    assert reason.startswith("verification failed: uv pip check"), reason


@dataclass(frozen=True)
class Lab:
    root: Path
    wheelhouse: Path
    first: Run
    second: Run


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("cuda-kernel-lab")
    links = root / "links"
    make_sdist(CUDA_STANDIN, links, name="cuda-standin")
    with lab_environment(root), pytest.MonkeyPatch.context() as patch:
        # the default index alone (no mirror from pip's config files): uv's cache then holds the
        # GBs of CUDA wheels once for every heavy run, wherever they were first fetched
        patch.setenv("PIP_CONFIG_FILE", os.devnull)
        first = install(root / "env-a", verl_repo_session)
        second = install(root / "env-b", verl_repo_session)
        yield Lab(root, root / "home" / "wheelhouse", first, second)


def test_nvcc_builds_the_kernel_for_one_architecture_and_publishes_it(lab: Lab) -> None:
    assert_kernel_answers(lab.first, lab.root / "env-a")
    log = lab.first.log("cuda-standin")
    assert "TORCH_CUDA_ARCH_LIST=9.0" in log
    nvcc = [line for line in log.splitlines() if "/bin/nvcc " in line]
    assert nvcc, "nvcc did not run"
    assert set(re.findall(r"code=sm_(\d+)", "\n".join(nvcc))) == {"90"}
    [entry] = Wheelhouse(lab.wheelhouse).entries()
    assert entry.file == "cuda_standin-0.1.0-cp311-cp311-linux_x86_64.whl"
    assert entry.key.describe() == KEY
    assert f"published {entry.file} to {lab.wheelhouse}" in log


def test_the_second_env_takes_the_cuda_wheel_without_nvcc(lab: Lab) -> None:
    assert_kernel_answers(lab.second, lab.root / "env-b")
    log = lab.second.log("cuda-standin")
    assert "/bin/nvcc " not in log and "g++" not in log
    assert f"prebuilt from the lab wheelhouse, built for {KEY}" in log
    assert "no compiler ran" in log
