"""Benchmark of kernel stages (not a test): the stand-in kernel stage (a C++ torch extension, see
tests/data/kernels/standin) as a source build into an empty lab wheelhouse, against the same stage
in a second env that takes the published wheel from the warm wheelhouse.

Run: .venv/bin/python bench/bench_kernels.py
Target (issue 10): the wheelhouse route at least 50x faster than a source build. The stand-in
compiles one small file in seconds, where flash-attn compiles for tens of minutes: its ratio is a
floor, and the stage's fixed cost (loading the compiled module, which imports torch) is printed
beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from kernellab import STANDIN, install_argv, make_sdist  # noqa: E402
from verlrepo import make_verl_repo  # noqa: E402

TOOL = str(Path(sys.executable).parent / "verl-bootstrap")


def stage_seconds(prefix: Path, repo: Path, env: dict[str, str]) -> float:
    """The kernel stage's seconds in one install of the kernel-stage profile."""
    done = subprocess.run(
        [TOOL, *install_argv(prefix, repo), "--json"], env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    steps = {s["id"]: s for s in json.loads(done.stdout)["steps"]}
    if steps["standin"]["status"] != "done":
        raise SystemExit(f"the kernel stage failed: {steps['standin']}")
    return float(steps["standin"]["seconds"])


def torch_import(python: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", "import torch"], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="vb-bench-kernels-"))
    try:
        repo = make_verl_repo(work / "verl")
        links = work / "links"
        make_sdist(STANDIN, links)
        env = {**os.environ, "VERL_BOOTSTRAP_HOME": str(work / "home")}
        env["PIP_FIND_LINKS"] = f"{env.get('PIP_FIND_LINKS', '')} {links}".strip()
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        built = stage_seconds(work / "env-build", repo, env)
        warm = stage_seconds(work / "env-warm", repo, env)
        fixed = torch_import(work / "env-warm" / "bin" / "python")
        rows = [
            ("stand-in kernel stage: source build, published to the wheelhouse", built, None),
            ("stand-in kernel stage: from the warm wheelhouse (no compiler)", warm, built / warm),
            ("  of which: loading the module after install (one torch import)", fixed, None),
        ]
        print(f"{'kernel stage':66} {'seconds':>8} {'x faster than build':>20}")
        for name, seconds, ratio in rows:
            shown = f"{ratio:.1f}x" if ratio else ""
            print(f"{name:66} {seconds:8.2f} {shown:>20}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
