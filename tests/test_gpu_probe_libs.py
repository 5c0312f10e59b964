"""The library probe, run for real in an interpreter, with and without a foreign cuDNN loaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from verl_bootstrap.plan.doctor.inputs import PROBE_LIBS

REAL_SO = Path("/lib/x86_64-linux-gnu/libz.so.1").resolve()


def _probe(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(PROBE_LIBS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(answer, dict)
    return answer


def test_probe_answers_one_json_object_and_records_a_missing_torch() -> None:
    answer = _probe(dict(os.environ))
    assert answer["schema"] == "verl-bootstrap.probe-libs/1"
    assert answer["prefix"] == sys.prefix
    torch = answer["torch"]
    assert isinstance(torch, dict)
    if "error" in torch:  # this venv has no torch: recorded, not raised
        assert str(torch["error"]).startswith("ModuleNotFoundError")
    assert answer["transformer_engine"] == {"installed": False}
    assert answer["maps_error"] is None


def test_probe_lists_a_foreign_cudnn_the_loader_put_in_the_process(tmp_path: Path) -> None:
    cudnn = tmp_path / "libcudnn.so.9"
    shutil.copy(REAL_SO, cudnn)
    answer = _probe({**os.environ, "LD_PRELOAD": str(cudnn)})
    assert answer["maps"] == [str(cudnn)]
