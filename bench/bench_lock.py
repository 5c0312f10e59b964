"""Benchmarks of the lock feature (not tests): `lock --profile cpu`, and a `--locked` install of the
cpu profile into a fresh env with a warm cache, against `uv pip sync` of the same packages (the
floor) and against pip installing the same hashed requirements.

Run: .venv/bin/python bench/bench_lock.py [--runs N] [--skip-pip]
Targets: the --locked install within 1.5x of the uv floor, and at least 5x faster than pip.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from uv import find_uv_bin

REPO = Path(__file__).resolve().parents[1]
LOCKFILE = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
UV = str(find_uv_bin())


def tool(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """verl-bootstrap ARGS in a fresh process."""
    argv = [sys.executable, "-m", "verl_bootstrap", *args]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False)
    if done.returncode != 0:
        raise SystemExit(f"verl-bootstrap {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done


def run(*argv: str) -> None:
    """A command that must succeed."""
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")


def timed(fn: Callable[[], object]) -> float:
    """Seconds `fn` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def python_of_lock() -> str:
    """An interpreter with the lockfile's Python X.Y."""
    import yaml  # noqa: PLC0415

    xy = yaml.safe_load(LOCKFILE.read_text().split("\n", 2)[2])["python"]
    found = subprocess.run(
        [UV, "python", "find", "--system", xy], capture_output=True, text=True, check=True
    )
    return found.stdout.strip()


def bench_lock(work: Path) -> float:
    """`lock --profile cpu` with the committed lock's Python and cutoff, into a scratch file."""
    out = work / "cpu.lock.yaml"
    shutil.copy(
        LOCKFILE, out
    )  # its Python and cutoff are kept; the file is rewritten only if changed
    out.unlink()
    import yaml  # noqa: PLC0415

    lock = yaml.safe_load(LOCKFILE.read_text().split("\n", 2)[2])
    args = ["lock", "--profile", "cpu", "--cuda", "cpu", "--python-version", lock["python"]]
    return timed(
        lambda: tool(*args, "--exclude-newer", lock["exclude_newer"], "--output", str(out))
    )


def bench_locked(work: Path, n: int) -> tuple[float, float]:
    """A --locked install into a fresh prefix: (whole command, without the verify step)."""
    prefix = work / f"locked-{n}"
    start = time.perf_counter()
    done = tool("--profile", "cpu", "--locked", "--prefix", str(prefix), "--json")
    total = time.perf_counter() - start
    steps = {s["id"]: s["seconds"] for s in json.loads(done.stdout)["steps"]}
    return total, total - steps.get("verify", 0.0)


def bench_floor(work: Path, n: int, pylock: Path, checkout: Path, python: str) -> float:
    """uv's floor: a venv, `uv pip sync pylock.toml`, then verl editable with no deps."""
    env = work / f"floor-{n}"

    def floor() -> None:
        run(UV, "venv", "-q", "--python", python, str(env))
        run(UV, "pip", "sync", "-q", "--python", str(env / "bin" / "python"), str(pylock))
        run(
            UV,
            "pip",
            "install",
            "-q",
            "--python",
            str(env / "bin" / "python"),
            "--no-deps",
            "-e",
            str(checkout),
        )

    return timed(floor)


def bench_pip(work: Path, requirements: Path, checkout: Path, python: str) -> float:
    """pip: a venv with pip, each stage's hashed requirements in order, verl editable."""
    env = work / "pip-env"

    def pip() -> None:
        run(UV, "venv", "-q", "--seed", "--python", python, str(env))
        py = str(env / "bin" / "python")
        for stage in sorted(requirements.glob("*.txt")):
            run(py, "-m", "pip", "install", "-q", "--require-hashes", "--no-deps", "-r", str(stage))
        run(py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(checkout))

    return timed(pip)


def main() -> int:
    """Run every benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-pip", action="store_true", help="pip takes minutes")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-lock-") as tmp:
        work = Path(tmp)
        python = python_of_lock()
        pylock, requirements = work / "pylock.toml", work / "requirements"
        tool("export", "--format", "pylock", "--lockfile", str(LOCKFILE), "--output", str(pylock))
        tool(
            "export",
            "--format",
            "requirements",
            "--lockfile",
            str(LOCKFILE),
            "--output",
            str(requirements),
        )
        lock_times = [bench_lock(work) for _ in range(ns.runs)]
        bench_locked(work, -1)  # warm every cache (uv's, the source's) once
        checkout = work / "locked--1" / "src" / "verl"
        locked = [bench_locked(work, n) for n in range(ns.runs)]
        floor = [bench_floor(work, n, pylock, checkout, python) for n in range(ns.runs)]
        pip_time = None if ns.skip_pip else bench_pip(work, requirements, checkout, python)
    report(lock_times, locked, floor, pip_time)
    return 0


def report(
    lock_times: list[float],
    locked: list[tuple[float, float]],
    floor: list[float],
    pip_time: float | None,
) -> None:
    """Medians and the ratios the targets are about."""
    total = statistics.median(t for t, _ in locked)
    install = statistics.median(i for _, i in locked)
    uv_floor = statistics.median(floor)
    print(f"lock --profile cpu (warm cache)        {statistics.median(lock_times):7.1f} s")
    print(f"--locked install, whole command        {total:7.1f} s")
    print(f"--locked install, without verify step  {install:7.1f} s")
    print(f"uv floor (venv + pip sync + verl -e)    {uv_floor:7.1f} s")
    print(f"  ratio (without verify) / floor       {install / uv_floor:7.2f}x  (target <= 1.5x)")
    print(f"  ratio (whole command) / floor        {total / uv_floor:7.2f}x")
    if pip_time is not None:
        print(f"pip --require-hashes, same packages    {pip_time:7.1f} s")
        print(f"  pip / --locked (without verify)      {pip_time / install:7.2f}x  (target >= 5x)")
        print(f"  pip / --locked (whole command)       {pip_time / total:7.2f}x")


if __name__ == "__main__":
    sys.exit(main())
