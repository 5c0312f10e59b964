"""`make bench`: verl-bootstrap against the by-hand recipe and raw uv, measured in one run.

Prints ratios against baselines measured in the same run; asserts nothing. Uses a local verl repo
made from verl's real sdist (as the tests do) so the figures do not depend on GitHub.

Baselines (issue 10):
- the by-hand recipe followed by the first import a user runs: a verified env is the product, so
  the fair baseline for the tool's whole run (verify included) is an install plus that import;
- raw uv installing the same exact pins the tool's env ended with (`uv venv` + `uv pip install`,
  the same warm uv cache and the same pip settings): the floor for the tool's install steps;
  measured again with both sides `--offline`, which leaves out the index's response times.

The warm-up run also fills the user's bytecode store (verl_bootstrap/verify/bytecode.py), so the
measured run restores compiled modules; a second run with the store off shows what it saves.
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
sys.path.insert(0, str(ROOT))
from verlrepo import make_verl_repo  # noqa: E402

from verl_bootstrap.commands import InstallRequest, install_command, uv_binary  # noqa: E402
from verl_bootstrap.host.indexes import read_pip_settings  # noqa: E402

BIN = Path(sys.executable).parent
TOOL = str(BIN / "verl-bootstrap")
# The first import a user runs in a new verl env (issue 10's fair baseline).
FIRST_IMPORT = "import verl, verl.trainer.main_ppo, torch, ray"
# What the cpu profile installs (profiles/cpu.yaml, verl v0.9.1): CPU torch, then verl's own
# requirements with its verl-core extra.
TORCH = "torch==2.13.0"
VERL_EXTRAS = "[verl-core]"


def timed(cmd: list[str], **kw: object) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    return time.perf_counter() - start


def tool_install(
    prefix: Path, repo: Path, env: dict[str, str] | None = None, *flags: str
) -> tuple[float, float, dict[str, float]]:
    """(whole run, install steps only, each step's seconds) for the cpu profile."""
    start = time.perf_counter()
    done = subprocess.run(
        [TOOL, "--profile", "cpu", "--prefix", str(prefix), "--verl-source", str(repo), "--json",
         *flags],
        check=True, capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
    total = time.perf_counter() - start
    steps = {s["id"]: float(s["seconds"]) for s in json.loads(done.stdout)["steps"]}
    install = sum(v for k, v in steps.items() if k not in ("verify", "record-lock", "warm-imports"))
    return total, install, steps


def by_hand(prefix: Path, repo: Path, python: str) -> tuple[float, float]:
    """The recipe users follow (venv, verl with --no-deps, torch, verl's requirements with the
    profile's extra, all with pip), then the first import: (install seconds, import seconds)."""
    start = time.perf_counter()
    subprocess.run([python, "-m", "venv", str(prefix)], check=True)
    py = str(prefix / "bin" / "python")
    pip = [py, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--no-deps", "-e", str(repo)], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*pip, TORCH], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*pip, "-e", f"{repo}{VERL_EXTRAS}"], check=True, stdout=subprocess.DEVNULL)
    installed = time.perf_counter() - start
    return installed, timed([py, "-W", "ignore", "-c", FIRST_IMPORT])


def exact_pins(env: Path) -> tuple[str, ...]:
    """Every distribution of the tool's env at its exact version, verl (editable) aside."""
    done = subprocess.run(
        [uv_binary(), "pip", "freeze", "--exclude-editable", "--python", str(env / "bin/python")],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return tuple(line for line in done.stdout.splitlines() if "==" in line)


def raw_uv(
    prefix: Path, repo: Path, python: str, pins: tuple[str, ...], *, offline: bool = False
) -> float:
    """`uv venv` + one `uv pip install` of the exact pins and verl editable, nothing resolved."""
    request = InstallRequest(
        python=prefix / "bin" / "python", packages=pins, editable=str(repo), no_deps=True,
        offline=offline,
    )  # fmt: skip
    start = time.perf_counter()
    subprocess.run([uv_binary(), "venv", "-q", "--python", python, str(prefix)], check=True)
    install = install_command("uv", request, read_pip_settings())
    subprocess.run(install, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def both_offline(work: Path, repo: Path, python: str, pins: tuple[str, ...]) -> tuple[float, float]:
    """The install steps and raw uv, each best of two, from the warm caches alone.

    An index that sends no caching headers makes uv fetch every page and every wheel's metadata
    again on each run, so each resolving run the tool makes costs seconds that a user of an
    index with caching headers does not pay. Offline, both sides read the same warm cache.
    """
    tool, floor = [], []
    for run in range(2):
        tool.append(tool_install(work / f"offline-{run}", repo, None, "--offline")[1])
        shutil.rmtree(work / f"offline-{run}")
        floor.append(raw_uv(work / f"uv-offline-{run}", repo, python, pins, offline=True))
        shutil.rmtree(work / f"uv-offline-{run}")
    return min(tool), min(floor)


def startup(args: list[str], runs: int = 5) -> float:
    return min(timed([TOOL, *args]) for _ in range(runs))


def plan_python(work: Path) -> str:
    """The interpreter the cpu profile's plan picks (the baselines use the same one)."""
    plan = subprocess.run(
        [TOOL, "plan", "--profile", "cpu", "--prefix", str(work / "p"), "--json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    argv = json.loads(plan.stdout)["steps"][0]["commands"][0]
    return str(argv[argv.index("--python") + 1])


def measure(work: Path) -> list[tuple[str, float, str]]:
    repo = make_verl_repo(work / "verl")
    python = plan_python(work)
    # Warm each cache once (the comparison is warm vs warm), then remove each env once measured:
    # pip's envs are full copies (GBs) and the disk may be shared.
    tool_install(work / "warmup", repo)
    pins = exact_pins(work / "warmup")
    by_hand(work / "hand-warmup", repo, python)
    raw_uv(work / "uv-warmup", repo, python, pins)
    for name in ("warmup", "hand-warmup", "uv-warmup"):
        shutil.rmtree(work / name)
    total, install, steps = tool_install(work / "tool", repo)  # the warm-up filled the store
    # the same run with the bytecode store off: verify compiles what it imports, as before it
    no_store = tool_install(work / "no-store", repo, {"VERL_BOOTSTRAP_NO_BYTECODE_CACHE": "1"})
    shutil.rmtree(work / "no-store")
    hand, first_import = by_hand(work / "hand", repo, python)
    shutil.rmtree(work / "hand")
    floor = raw_uv(work / "uv", repo, python, pins)
    shutil.rmtree(work / "uv")
    noop = min(tool_install(work / "tool", repo)[0] for _ in range(3))
    offline, offline_floor = both_offline(work, repo, python, pins)
    help_s = startup(["--help"])
    plan_s = startup(["plan", "--profile", "cpu", "--prefix", str(work / "tool")])
    baseline = hand + first_import
    verify = steps.get("verify", 0.0)
    return [
        ("cpu, warm caches: verl-bootstrap whole run (verify included)", total,
         f"{baseline / total:.1f}x faster than [a]+[b]"),
        ("  of which: the install steps", install, f"{hand / install:.1f}x faster than [a]"),
        ("  of which: verify (imports, versions, uv pip check)", verify, ""),
        ("the same, bytecode store off: whole run", no_store[0],
         f"{baseline / no_store[0]:.1f}x faster than [a]+[b]"),
        ("  of which: verify", no_store[2].get("verify", 0.0), ""),
        ("[a] by hand: venv + pip, warm pip cache", hand, ""),
        (f"[b] then the first import: python -c '{FIRST_IMPORT}'", first_import, ""),
        ("[c] raw uv: uv venv + uv pip install of the env's exact pins", floor,
         f"install steps = {install / floor:.2f}x [c]"),
        ("install steps, both offline (--offline: warm caches, no index request)", offline,
         f"{offline / offline_floor:.2f}x [c] offline"),
        ("[c] offline: raw uv --offline, the same pins", offline_floor, ""),
        ("no-op re-run", noop, ""),
        ("`verl-bootstrap --help` start-up", help_s, ""),
        ("`verl-bootstrap plan --profile cpu`", plan_s, ""),
    ]  # fmt: skip


def main() -> None:
    # Measure what a user's shell gets: Python caches compiled modules (.pyc) after the first
    # run. Hosts that set PYTHONDONTWRITEBYTECODE (CI images, this project's dev machines)
    # would otherwise recompile the tool on every start, and every first import would stay cold.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(tempfile.mkdtemp(prefix="vb-bench-"))
    try:
        rows = measure(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'measurement':66} {'seconds':>8}  ratio")
    for name, seconds, ratio in rows:
        print(f"{name:66} {seconds:8.2f}  {ratio}")
    if "--main-only" in sys.argv:  # the table above alone (the others take minutes)
        return
    for extra in ("bench_lock.py", "bench_kernels.py", "bench_bundle.py"):
        if (ROOT / "bench" / extra).exists():
            print()
            subprocess.run([sys.executable, str(ROOT / "bench" / extra)], check=False)


if __name__ == "__main__":
    main()
