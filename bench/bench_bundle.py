"""Benchmarks of offline bundles (not tests): `bundle` of the committed cpu lock, and an install
from that bundle with no network against a `--locked` install of the same lock from the index,
in one run, each into a fresh env with warm caches.

Run: .venv/bin/python bench/bench_bundle.py [--runs N]
Target: the offline install within 1.2x of the online `--locked` install, both ending verified
(the verify step is part of the install: "ends verified, like any --locked install"). The ratio
without the verify step is printed too. Each env is deleted once measured (1.5 GB each).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lock import LOCKFILE, REPO, bench_locked, tool


def no_network() -> list[str]:
    """unshare -n where this user may make a network namespace, else nothing (said below)."""
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return ["unshare", "-n"] if done.returncode == 0 else []


def bench_bundle(work: Path) -> tuple[float, int]:
    """`bundle` of the committed cpu lock: (seconds, bytes)."""
    out = work / "cpu.tar"
    start = time.perf_counter()
    tool("bundle", "--lockfile", str(LOCKFILE), "-o", str(out))
    return time.perf_counter() - start, out.stat().st_size


def bench_offline(work: Path, n: int, cut: list[str]) -> tuple[float, float]:
    """An install from the bundle into a fresh prefix: (whole command, without verify)."""
    prefix = work / f"offline-{n}"
    argv = [*cut, sys.executable, "-m", "verl_bootstrap", "--bundle", str(work / "cpu.tar")]
    argv += ["--profile", "cpu", "--prefix", str(prefix), "--json"]
    start = time.perf_counter()
    # the bundle is unpacked into the tool's cache once and kept: a scratch cache, not the user's
    env = {**os.environ, "VERL_BOOTSTRAP_CACHE": str(work / "cache")}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=False, env=env)
    total = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"install from the bundle failed:\n{done.stderr[-3000:]}")
    steps = {s["id"]: s["seconds"] for s in json.loads(done.stdout)["steps"]}
    return total, total - steps.get("verify", 0.0)


def dropped(work: Path, kind: str, n: int, seconds: tuple[float, float]) -> tuple[float, float]:
    """Delete the env just measured (the disk holds one at a time) and pass its times on."""
    shutil.rmtree(work / f"{kind}-{n}", ignore_errors=True)
    return seconds


def main() -> int:
    """Run the benchmarks and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    ns = parser.parse_args()
    cut = no_network()
    with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
        work = Path(tmp)
        first = bench_bundle(work)  # fills the download cache if it was empty
        again = bench_bundle(work)
        dropped(work, "locked", -1, bench_locked(work, -1))  # warm uv's and the sdist cache once
        dropped(work, "offline", -1, bench_offline(work, -1, cut))
        online = [dropped(work, "locked", n, bench_locked(work, n)) for n in range(ns.runs)]
        offline = [dropped(work, "offline", n, bench_offline(work, n, cut)) for n in range(ns.runs)]
    report(first, again, online, offline, cut)
    return 0


def report(
    first: tuple[float, int],
    again: tuple[float, int],
    online: list[tuple[float, float]],
    offline: list[tuple[float, float]],
    cut: list[str],
) -> None:
    """Medians and the ratio the target is about."""
    on_total = statistics.median(t for t, _ in online)
    on_install = statistics.median(i for _, i in online)
    off_total = statistics.median(t for t, _ in offline)
    off_install = statistics.median(i for _, i in offline)
    where = "in a network namespace with no interfaces" if cut else "WITH the network (no unshare)"
    print(f"bundle of the cpu lock, first run        {first[0]:7.1f} s  {first[1] / 2**20:.0f} MiB")
    print(f"bundle of the cpu lock, cached downloads {again[0]:7.1f} s")
    print(f"--locked install from the index, whole   {on_total:7.1f} s")
    print(f"  without the verify step                {on_install:7.1f} s")
    print(f"install from the bundle, whole           {off_total:7.1f} s  ({where})")
    print(f"  without the verify step                {off_install:7.1f} s")
    print(
        f"  ratio offline / online (ends verified) {off_total / on_total:7.2f}x  (target <= 1.2x)"
    )
    print(f"  ratio offline / online (no verify)     {off_install / on_install:7.2f}x")


if __name__ == "__main__":
    sys.exit(main())
