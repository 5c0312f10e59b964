"""`verify --train sft|rl` on a GPU profile's env, on a host with a GPU: the levels with the env's
own rollout engine (vLLM, else SGLang), FSDP2 and bf16, no plugin.

Heavy (it installs a GPU profile: several GB) and `gpu`: where this host has no NVIDIA driver the
test skips, saying so; everywhere else it runs (`make test-heavy`). The CPU route of the same
levels runs in the default suite (tests/test_verify_train.py).
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from scaffold import tool_json

from verl_bootstrap.machine.gpu.detect import detect_driver

pytestmark = [pytest.mark.heavy, pytest.mark.gpu, pytest.mark.timeout(3600 + 2 * 2400)]

WORK = Path(__file__).parents[1] / "build" / "heavy" / "train-gpu"


@pytest.fixture(scope="module")
def gpu_env() -> Path:
    """The fsdp profile (vLLM rollout) installed here, once for the module."""
    if detect_driver() is None:
        pytest.skip("needs an NVIDIA GPU and driver: the GPU training levels run on one")
    shutil.rmtree(WORK, ignore_errors=True)
    prefix = WORK / "env"
    argv = ["install", "--profile", "fsdp", "--prefix", str(prefix), "--json"]
    code, report, stderr = tool_json(*argv, timeout=3600)
    assert code == 0, (report.get("error"), stderr[-2000:])
    return prefix


@pytest.mark.parametrize("level", ["sft", "rl"])
def test_the_gpu_env_trains(gpu_env: Path, level: str) -> None:
    argv = ["verify", "--prefix", str(gpu_env), "--train", level, "--json"]
    code, body, stderr = tool_json(*argv, timeout=2400)
    train = body.get("train") or {}
    checks = {c["name"]: c for c in train.get("checks", [])}
    assert code == 0, (checks, stderr[-2000:])
    assert train["route"] == "gpu:vllm"  # the fsdp profile's rollout engine, no plugin
    assert checks["weights changed"]["status"] == checks["resume"]["status"] == "ok"
    figures = train["figures"]
    loss = figures["loss"] if level == "sft" else figures["policy_loss"]
    assert math.isfinite(loss)
    if level == "rl":
        assert figures["advantage_max_abs"] > 0
        assert checks["log-prob agreement"]["status"] == "ok", checks["log-prob agreement"]
