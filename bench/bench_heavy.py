"""`make bench-heavy`'s lock rows: a committed GPU lock's install steps against raw uv installing
the same exact pins, warm uv cache. Prints medians and ratios; asserts nothing.

What is installed is what the heavy tier installs (bench/heavylock.py): the committed
`lockfiles/P/cu130-linux-64.lock.yaml`, less each kernel stage whose prebuilt wheel this host
cannot reach (named in the output). Both sides run with a user's pip settings (the default index
alone, not this machine's find-links and constraints), the user's own uv cache, warmed by one
run of the tool first, and PYTHONDONTWRITEBYTECODE=1 as on CI; every timed run starts after
`sync`, and its env is removed after it.

- the tool: `verl-bootstrap --profile P --cuda cu130 --backend venv --lockfile LOCK --json`;
  its install steps (create-env to the last stage: the sum of their seconds) and the whole
  command less its verify step (start-up, plan, preflight and the lookup of the lock's files
  counted too).
- raw uv: `uv venv`, one `uv pip install --no-deps --require-hashes` of the lock's requirements
  as `verl-bootstrap export --format requirements` writes them (every stage's file in one call),
  then verl editable from the same unpacked sdist; as typed (uv asks the index whether its
  cached pages are fresh), and with `--offline` (the cache alone, as the tool asks first).

The sides run in turn, RUNS times each (the host may be shared: its load moves every figure).

Run: .venv/bin/python bench/bench_heavy.py [--profile P ...] [--runs N]   (default: fsdp, 2)
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
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.heavylock import Derived, derive  # noqa: E402
from verl_bootstrap.installer.cmdline import uv_binary  # noqa: E402
from verl_bootstrap.lock.io import read_lockfile  # noqa: E402
from verl_bootstrap.profile import load_profile  # noqa: E402
from verl_bootstrap.profile.stacks import apply_stack  # noqa: E402

TOOL = str(Path(sys.executable).parent / "verl-bootstrap")
VARIANT = "cu130"
NOT_INSTALL = ("verify", "record-lock", "warm-imports")


def user_environment() -> dict[str, str]:
    """This environment as a user's: no find-links or pip config of this machine's, no .pyc."""
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PYTHONDONTWRITEBYTECODE": "1"}


def run(argv: list[str], env: dict[str, str]) -> str:
    """A command that must succeed; its stdout."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... failed:\n{done.stderr[-3000:]}")
    return done.stdout


def prepare(name: str, work: Path, env: dict[str, str]) -> tuple[Derived, str]:
    """The lock and profile to install (less what this host cannot reach), and the Python."""
    lock_path = ROOT / "lockfiles" / name / f"{VARIANT}-linux-64.lock.yaml"
    lock = read_lockfile(lock_path)
    argv = [TOOL, "plan", "--profile", name, "--cuda", VARIANT, "--backend", "venv"]
    argv += ["--lockfile", str(lock_path), "--frozen", "--prefix", str(work / "p"), "--json"]
    plan = json.loads(run(argv, env))
    command = plan["steps"][0]["commands"][0]
    python = str(command[command.index("--python") + 1])
    profile = apply_stack(load_profile(name), lock.verl.ref)
    return derive(profile, VARIANT, lock, plan, work / "derived"), python


def tool_run(derived: Derived, prefix: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """One locked install: (its install steps, the command less verify, its route line)."""
    argv = [TOOL, "--profile", str(derived.profile), "--lockfile", str(derived.lockfile)]
    argv += ["--cuda", VARIANT, "--backend", "venv", "--prefix", str(prefix)]
    argv += ["--skip-check", "disk", "--json"]
    os.sync()  # the removal of an earlier env written back first: it is not this run's work
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    total = time.perf_counter() - start
    body = json.loads(done.stdout)  # a failed verify still reports every step
    steps = {s["id"]: float(s["seconds"]) for s in body["steps"]}
    failed = [
        s["id"] for s in body["steps"] if s["status"] != "done" and s["id"] not in NOT_INSTALL
    ]
    if failed:
        raise SystemExit(f"the locked install failed at {failed}: {done.stderr[-2000:]}")
    install = sum(v for k, v in steps.items() if k not in NOT_INSTALL)
    return install, total - steps.get("verify", 0.0), str(body["route"]["line"])


def raw_uv(
    prefix: Path,
    python: str,
    files: list[Path],
    checkout: Path,
    env: dict[str, str],
    *,
    offline: bool,
) -> float:
    """`uv venv` + the hashed requirements in one install + verl editable, nothing resolved."""
    uv, target = uv_binary(), str(prefix / "bin" / "python")
    flags = ["--offline"] if offline else []
    requirements = [a for f in files for a in ("-r", str(f))]
    os.sync()
    start = time.perf_counter()
    run([uv, "venv", "-q", "--python", python, str(prefix)], env)
    install = [uv, "pip", "install", "-q", *flags, "--python", target, "--no-deps"]
    run([*install, "--require-hashes", *requirements], env)
    run([*install, "-e", str(checkout)], env)
    return time.perf_counter() - start


def bench(name: str, runs: int, work: Path) -> list[tuple[str, str]]:
    """The rows of one lock: (measurement, figure)."""
    env = user_environment()
    derived, python = prepare(name, work, env)
    requirements = work / "requirements"
    export = [TOOL, "export", "--format", "requirements", "--lockfile", str(derived.lockfile)]
    run([*export, "--output", str(requirements)], env)
    files = sorted(requirements.glob("*.txt"))
    _, _, route = tool_run(derived, work / "warmup", env)  # fills the uv cache, the source cache
    checkout = work / "verl"
    shutil.copytree(work / "warmup" / "src" / "verl", checkout)
    shutil.rmtree(work / "warmup")
    raw_uv(work / "uv-warmup", python, files, checkout, env, offline=False)
    shutil.rmtree(work / "uv-warmup")
    tools, floors, offline = [], [], []
    for i in range(runs):
        tools.append(tool_run(derived, work / f"tool-{i}", env))
        shutil.rmtree(work / f"tool-{i}")
        floors.append(raw_uv(work / f"uv-{i}", python, files, checkout, env, offline=False))
        shutil.rmtree(work / f"uv-{i}")
        offline.append(raw_uv(work / f"off-{i}", python, files, checkout, env, offline=True))
        shutil.rmtree(work / f"off-{i}")
    return rows(name, derived, route, tools=tools, floors=floors, offline=offline)


def rows(
    name: str,
    derived: Derived,
    route: str,
    *,
    tools: list[tuple[float, float, str]],
    floors: list[float],
    offline: list[float],
) -> list[tuple[str, str]]:
    install = statistics.median(t[0] for t in tools)
    command = statistics.median(t[1] for t in tools)
    floor, floor_off = statistics.median(floors), statistics.median(offline)
    left = "; ".join(f"stage {g.stage} left out: {g.note()}" for g in derived.left_out)
    n = len(tools)
    return [
        (f"{name}: route", route.replace(str(derived.lockfile), f"lockfiles/{name}/...")),
        (f"{name}: left out", left or "nothing"),
        (
            f"{name}: the tool's install steps, median of {n}",
            f"{install:.2f} s = {install / floor:.2f}x [c] (target within 1.2x), "
            f"{install / floor_off:.2f}x [c offline]; runs {_each(t[0] for t in tools)}",
        ),
        (
            f"{name}: the whole command less its verify, median of {n}",
            f"{command:.2f} s = {command / floor:.2f}x [c], {command / floor_off:.2f}x "
            f"[c offline]; runs {_each(t[1] for t in tools)}",
        ),
        (f"{name}: [c] raw uv, median of {n}", f"{floor:.2f} s; runs {_each(floors)}"),
        (
            f"{name}: [c offline] raw uv --offline, median of {n}",
            f"{floor_off:.2f} s; runs {_each(offline)}",
        ),
    ]


def _each(values: Iterable[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="append", help="fsdp, sglang, vllm-only, megatron")
    parser.add_argument("--runs", type=int, default=2)
    ns = parser.parse_args()
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    load = os.getloadavg()[0]
    print(f"load average at the start: {load:.1f} on {os.cpu_count()} cores")
    for name in ns.profile or ["fsdp"]:
        work = Path(tempfile.mkdtemp(prefix=f"vb-bench-heavy-{name}-"))
        try:
            for label, figure in bench(name, ns.runs, work):
                print(f"{label:58} {figure}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
