"""`make bench`: verl-bootstrap against the by-hand recipe, measured side by side in one run.

Prints ratios against baselines measured in the same run; asserts nothing. Uses a local verl repo
made from verl's real sdist (as the tests do) so the figures do not depend on GitHub.
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
from verlrepo import make_verl_repo  # noqa: E402

BIN = Path(sys.executable).parent
TOOL = str(BIN / "verl-bootstrap")


def timed(cmd: list[str], **kw: object) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    return time.perf_counter() - start


def tool_install(prefix: Path, repo: Path) -> tuple[float, float]:
    """(whole run, install steps only) seconds for the cpu profile."""
    start = time.perf_counter()
    done = subprocess.run(
        [TOOL, "--profile", "cpu", "--prefix", str(prefix), "--verl-source", str(repo), "--json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    total = time.perf_counter() - start
    steps = json.loads(done.stdout)["steps"]
    install = sum(s["seconds"] for s in steps if s["id"] not in ("verify", "record-lock"))
    return total, install


def by_hand(prefix: Path, repo: Path, python: str) -> float:
    """The recipe users follow: venv, pip install --no-deps -e ., pip install the same packages."""
    start = time.perf_counter()
    subprocess.run([python, "-m", "venv", str(prefix)], check=True)
    pip = [str(prefix / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", "-e", str(repo)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*pip, "torch==2.13.0"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        [*pip, "-e", str(repo), "cachetools", "uvicorn", "fastapi"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def startup(args: list[str], runs: int = 5) -> float:
    return min(timed([TOOL, *args]) for _ in range(runs))


def main() -> None:
    # Measure what a user's shell gets: Python caches compiled modules (.pyc) after the first
    # run. Hosts that set PYTHONDONTWRITEBYTECODE (CI images, this project's dev machines)
    # would otherwise recompile the tool on every start.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(tempfile.mkdtemp(prefix="vb-bench-"))
    try:
        repo = make_verl_repo(work / "verl")
        interpreter = json.loads(
            subprocess.run(
                [TOOL, "plan", "--profile", "cpu", "--prefix", str(work / "p"), "--json"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )["steps"][0]["commands"][0]
        python = interpreter[interpreter.index("--python") + 1]
        tool_install(work / "warmup", repo)  # warm uv's cache: the comparison is warm vs warm
        by_hand(work / "hand-warmup", repo, python)  # and pip's cache
        total, install = tool_install(work / "tool", repo)
        hand = by_hand(work / "hand", repo, python)
        noop = min(tool_install(work / "tool", repo)[0] for _ in range(3))
        help_s = startup(["--help"])
        plan_s = startup(["plan", "--profile", "cpu", "--prefix", str(work / "tool")])
        rows = [
            ("cpu profile, warm cache: verl-bootstrap install steps", install, hand / install),
            (
                "cpu profile, warm cache: verl-bootstrap whole run (incl. verify)",
                total,
                hand / total,
            ),
            ("by-hand recipe (venv + pip), warm pip cache", hand, 1.0),
            ("no-op re-run", noop, None),
            ("`verl-bootstrap --help` start-up", help_s, None),
            ("`verl-bootstrap plan --profile cpu`", plan_s, None),
        ]
        print(f"{'measurement':66} {'seconds':>8} {'x faster than by-hand':>22}")
        for name, seconds, ratio in rows:
            shown = f"{ratio:.1f}x" if ratio else ""
            print(f"{name:66} {seconds:8.2f} {shown:>22}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for extra in ("bench_lock.py", "bench_kernels.py", "bench_bundle.py"):
        if (ROOT / "bench" / extra).exists():
            print()
            subprocess.run([sys.executable, str(ROOT / "bench" / extra)], check=False)


if __name__ == "__main__":
    main()
