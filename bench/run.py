"""`make bench`: verl-bootstrap against the by-hand recipe and raw uv, measured in one run.

Prints ratios against baselines measured in the same run; asserts nothing. As on CI,
PYTHONDONTWRITEBYTECODE=1 for every process, and every cache is warmed once first.

- The default run, `verl-bootstrap --profile cpu` (it installs the committed lockfile when it
  fits; the route each run took is printed, so a figure is never read for the other), whole run
  with verify, against the by-hand recipe (venv, pip installing verl and its requirements) plus
  the first import a user runs: a verified env is the product, so that is the fair baseline.
- Its install steps against raw uv installing the same exact pins into a fresh venv (`uv venv` +
  one `uv pip install`, the same warm uv cache and pip settings): the floor.
- The default run and raw uv are each the median of three fresh envs (a run of a few seconds
  moves with the host's load); the by-hand recipe, minutes long, runs once.
- A second env at the same verl commit: fetch-source from the source cache (the run's own step,
  and verl's git route through the per-user mirror, `source.fetch.fetch_source` alone).

The by-hand recipe installs verl from a local repo made from verl's real sdist (as the tests do),
so the figures do not depend on GitHub.

The warm-up run also fills the user's bytecode store (verl_bootstrap/verify/bytecode.py), so the
measured run restores compiled modules; a second run with the store off shows what it saves.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
from verlrepo import make_verl_repo  # noqa: E402

from verl_bootstrap.installer.cmdline import InstallRequest, install_command, uv_binary  # noqa: E402
from verl_bootstrap.machine.host.indexes import read_pip_settings  # noqa: E402

BIN = Path(sys.executable).parent
TOOL = str(BIN / "verl-bootstrap")
# The first import a user runs in a new verl env (issue 10's fair baseline).
FIRST_IMPORT = "import verl, verl.trainer.main_ppo, torch, ray"
# What the cpu profile installs (profiles/cpu.yaml, verl v0.9.1): CPU torch, then verl's own
# requirements with its verl-core extra.
TORCH = "torch==2.13.0"
VERL_EXTRAS = "[verl-core]"
RUNS = 3  # fresh envs per figure of the default run and of raw uv (each row: their median)


def timed(cmd: list[str], **kw: object) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    return time.perf_counter() - start


@dataclass(frozen=True)
class ToolRun:
    """One `verl-bootstrap --profile cpu` run: its route, whole time, install steps, each step."""

    route: str
    total: float
    install: float
    steps: dict[str, float]


def tool_install(prefix: Path, env: dict[str, str] | None = None, *flags: str) -> ToolRun:
    """The default cpu run, as a user types it (plus --prefix and --json)."""
    os.sync()  # the removal of an earlier env written back first: it is not this run's work
    start = time.perf_counter()
    done = subprocess.run(
        [TOOL, "--profile", "cpu", "--prefix", str(prefix), "--json", *flags],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    total = time.perf_counter() - start
    body = json.loads(done.stdout)
    steps = {s["id"]: float(s["seconds"]) for s in body["steps"]}
    install = sum(v for k, v in steps.items() if k not in ("verify", "record-lock", "warm-imports"))
    return ToolRun(str(body["route"]["line"]), total, install, steps)


def median_run(runs: list[ToolRun]) -> ToolRun:
    """Each figure the median of the runs' (whole run, install steps, each step)."""
    steps = {k: statistics.median(r.steps.get(k, 0.0) for r in runs) for k in runs[0].steps}
    return ToolRun(
        runs[0].route,
        statistics.median(r.total for r in runs),
        statistics.median(r.install for r in runs),
        steps,
    )


def by_hand(prefix: Path, repo: Path, python: str) -> tuple[float, float]:
    """The recipe users follow (venv, verl with --no-deps, torch, verl's requirements with the
    profile's extra, all with pip), then the first import: (install seconds, import seconds)."""
    os.sync()  # as for the tool's run
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
        check=True,
        capture_output=True,
        text=True,
    )
    return tuple(line for line in done.stdout.splitlines() if "==" in line)


def raw_uv(
    prefix: Path, repo: Path, python: str, pins: tuple[str, ...], *, offline: bool = False
) -> float:
    """`uv venv` + one `uv pip install` of the exact pins and verl editable, nothing resolved."""
    request = InstallRequest(
        python=prefix / "bin" / "python",
        packages=pins,
        editable=str(repo),
        no_deps=True,
        offline=offline,
    )
    os.sync()  # as for the tool's run
    start = time.perf_counter()
    subprocess.run([uv_binary(), "venv", "-q", "--python", python, str(prefix)], check=True)
    install = install_command("uv", request, read_pip_settings())
    subprocess.run(install, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def git_second_fetch(work: Path, repo: Path) -> float:
    """verl's git route: the second env's fetch-source at the same commit, from the mirror."""
    from verl_bootstrap.machine.host.indexes import IndexSettings  # noqa: PLC0415 - bench helper
    from verl_bootstrap.source.fetch import fetch_source  # noqa: PLC0415 - as above
    from verl_bootstrap.source.spec import SourceSpec  # noqa: PLC0415 - as above

    seconds = []
    for name in ("git-first", "git-second"):
        spec = SourceSpec(repo.as_uri(), "v0.9.1", work / name / "src" / "verl", False)
        (work / name).mkdir()
        start = time.perf_counter()
        fetch_source(spec, IndexSettings(), pip=[], log_path=work / name / "fetch.log")
        seconds.append(time.perf_counter() - start)
    return seconds[1]


def startup(args: list[str], runs: int = 5) -> float:
    return min(timed([TOOL, *args]) for _ in range(runs))


def plan_python(work: Path) -> str:
    """The interpreter the cpu profile's plan picks (the baselines use the same one)."""
    plan = subprocess.run(
        [TOOL, "plan", "--profile", "cpu", "--prefix", str(work / "p"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    argv = json.loads(plan.stdout)["steps"][0]["commands"][0]
    return str(argv[argv.index("--python") + 1])


def measure(work: Path) -> list[tuple[str, float, str]]:
    repo = make_verl_repo(work / "verl")
    python = plan_python(work)
    # Warm each cache once (the comparison is warm vs warm), then remove each env once measured:
    # pip's envs are full copies (GBs) and the disk may be shared. The warm-up run also fills the
    # bytecode store and the source cache, as a user's earlier env would have.
    tool_install(work / "warmup")
    pins = exact_pins(work / "warmup")
    by_hand(work / "hand-warmup", repo, python)
    raw_uv(work / "uv-warmup", repo, python, pins)
    for name in ("warmup", "hand-warmup", "uv-warmup"):
        shutil.rmtree(work / name)
    # the default run and the floor, each the median of RUNS fresh envs, taken in turn so both
    # see the same host (a run of a few seconds moves with its load; the by-hand baseline,
    # minutes long, is run once)
    runs, floors = [], []
    for i in range(RUNS):
        runs.append(tool_install(work / f"tool-{i}"))
        floors.append(raw_uv(work / f"uv-{i}", repo, python, pins))
        shutil.rmtree(work / f"uv-{i}")
    tool, floor = median_run(runs), statistics.median(floors)
    for i in range(1, RUNS):
        shutil.rmtree(work / f"tool-{i}")
    # the same run with the bytecode store off: verify compiles what it imports, as before it
    no_store = tool_install(work / "no-store", {"VERL_BOOTSTRAP_NO_BYTECODE_CACHE": "1"})
    shutil.rmtree(work / "no-store")
    resolved = tool_install(work / "resolved", None, "--resolve")
    shutil.rmtree(work / "resolved")
    hand, first_import = by_hand(work / "hand", repo, python)
    shutil.rmtree(work / "hand")
    noop = min(tool_install(work / "tool-0").total for _ in range(3))
    git_fetch = git_second_fetch(work, repo)
    help_s = startup(["--help"])
    plan_s = startup(["plan", "--profile", "cpu", "--prefix", str(work / "tool-0")])
    baseline = hand + first_import
    return [
        (f"route: {tool.route}", 0.0, ""),
        (
            f"cpu, warm caches: verl-bootstrap whole run (verify included), median of {RUNS}",
            tool.total,
            f"{baseline / tool.total:.1f}x faster than [a]+[b] (target 10x)",
        ),
        (
            "  of which: the install steps",
            tool.install,
            f"{tool.install / floor:.2f}x [c] (target within 1.2x)",
        ),
        *(
            (f"    step {name}", seconds, "")
            for name, seconds in tool.steps.items()
            if name not in ("fetch-source", "verify", "record-lock", "warm-imports")
        ),
        (
            "  of which: fetch-source (a second env at the same verl commit)",
            tool.steps.get("fetch-source", 0.0),
            "target < 0.5 s",
        ),
        ("  of which: verify (imports, versions, uv pip check)", tool.steps.get("verify", 0.0), ""),
        (
            "the same, bytecode store off: whole run",
            no_store.total,
            f"{baseline / no_store.total:.1f}x faster than [a]+[b]",
        ),
        (
            f"the same with --resolve ({resolved.route}): whole run",
            resolved.total,
            f"{baseline / resolved.total:.1f}x faster than [a]+[b]",
        ),
        ("  of which: the install steps", resolved.install, f"{resolved.install / floor:.2f}x [c]"),
        ("[a] by hand: venv + pip, warm pip cache", hand, ""),
        (f"[b] then the first import: python -c '{FIRST_IMPORT}'", first_import, ""),
        (f"[c] raw uv: uv venv + uv pip install of the exact pins, median of {RUNS}", floor, ""),
        (
            "verl's git route: a second env's fetch-source from the mirror",
            git_fetch,
            "target < 0.5 s",
        ),
        ("no-op re-run", noop, ""),
        ("`verl-bootstrap --help` start-up", help_s, ""),
        ("`verl-bootstrap plan --profile cpu`", plan_s, ""),
    ]


def main() -> None:
    # As on CI and in many images: Python writes no bytecode for the user's own processes (the
    # by-hand first import stays cold after pip, which compiled at install time anyway).
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
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
    for extra in (
        "bench_lock.py",
        "bench_kernels.py",
        "bench_bundle.py",
        "bench_rerun.py",
        "bench_train.py",
    ):
        if (ROOT / "bench" / extra).exists():
            print()
            subprocess.run([sys.executable, str(ROOT / "bench" / extra)], check=False)


if __name__ == "__main__":
    main()
