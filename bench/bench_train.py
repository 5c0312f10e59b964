"""`make bench` row: what `verify --train sft` and `verify --train rl` cost on the cpu profile.

One cpu env (verl 0.9.1, from a local repo made from verl's real sdist, as the tests do), then
each level once through the CLI: its wall time (the ordinary verify included, the level's own
seconds apart) and the peak resident memory of the largest single process it started (not the sum
over Ray's processes). Asserts nothing.
Run alone: `.venv/bin/python bench/bench_train.py`.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from verlrepo import make_verl_repo  # noqa: E402

TOOL = str(Path(sys.executable).parent / "verl-bootstrap")


def _env(work: Path) -> Path:
    repo = make_verl_repo(work / "verl")
    prefix = work / "cpu"
    argv = [TOOL, "--profile", "cpu", "--prefix", str(prefix), "--verl-source", str(repo)]
    subprocess.run([*argv, "--json"], check=True, stdout=subprocess.DEVNULL)
    return prefix


def _level(prefix: Path, level: str) -> tuple[float, float, dict[str, object]]:
    start = time.perf_counter()
    argv = [TOOL, "verify", "--prefix", str(prefix), "--train", level, "--json"]
    done = subprocess.run(argv, check=False, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    train = json.loads(done.stdout).get("train") or {}
    return seconds, float(train.get("seconds") or 0.0), train


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="vb-bench-train-"))
    try:
        prefix = _env(work)
        rows = []
        for level in ("sft", "rl"):
            total, own, train = _level(prefix, level)
            peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
            rows.append((level, total, own, peak_gib, train.get("ok")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    title = "measurement (cpu profile, verl 0.9.1)"
    print(f"{title:50} {'seconds':>8} {'step':>6} {'largest GiB':>11}  ok")
    for level, total, own, peak, ok in rows:
        name = f"`verify --train {level}` (verify + {level} step + resume)"
        print(f"{name:50} {total:8.1f} {own:6.1f} {peak:11.2f}  {ok}")


if __name__ == "__main__":
    main()
