"""`make bench` row: a re-run of an intact cpu env, which checks the env against its record first.

Builds one cpu env as a user would (`verl-bootstrap --profile cpu --prefix P`, warm caches),
then times the same command again (nothing to do: every step up to date, the env's
distributions and their RECORD digests compared with its record), the best of three, and the
check alone (`compare_env` against the env's own record, in this process), the best of five.
Prints the figures; asserts nothing. Run alone: `python bench/bench_rerun.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from verl_bootstrap.lock.drift import compare_env  # noqa: E402
from verl_bootstrap.lock.io import read_lockfile  # noqa: E402
from verl_bootstrap.paths import env_lockfile  # noqa: E402

TOOL = str(Path(sys.executable).parent / "verl-bootstrap")
RUNS = 3


def install(prefix: Path) -> float:
    """The default cpu run, as a user types it (plus --prefix and --json), timed."""
    start = time.perf_counter()
    subprocess.run(
        [TOOL, "--profile", "cpu", "--prefix", str(prefix), "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def check_alone(prefix: Path, runs: int = 5) -> float:
    """The check a re-run makes, alone: the env's dist-info against its own record."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        compare_env(prefix, read_lockfile(env_lockfile(prefix)), own=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    with tempfile.TemporaryDirectory(prefix="vb-bench-rerun-") as work:
        prefix = Path(work) / "cpu"
        first = install(prefix)
        rerun = min(install(prefix) for _ in range(RUNS))
        check = check_alone(prefix)
    rows = [
        ("cpu env, first install (warm caches)", first, ""),
        (f"intact re-run, env checked against its record (best of {RUNS})", rerun, "target < 1 s"),
        ("  of which: the check (dist-info + RECORD digests vs the record)", check, ""),
    ]
    print(f"{'measurement':66} {'seconds':>8}  target")
    for name, seconds, target in rows:
        print(f"{name:66} {seconds:8.2f}  {target}")


if __name__ == "__main__":
    main()
