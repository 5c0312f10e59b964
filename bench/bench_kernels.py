"""Benchmark of kernel stages (not a test): the stand-in kernel stage (a C++ torch extension, see
tests/data/kernels/standin) as a source build into an empty lab wheelhouse, against the same stage
in a second env that takes the published wheel from the warm wheelhouse.

Run: .venv/bin/python bench/bench_kernels.py
Target (issue 10): the wheelhouse route at least 50x faster than a source build. The stand-in
compiles one small file in seconds, where flash-attn compiles for tens of minutes: its ratio is a
floor. The stage's phases (from its outputs in the env's state) show where the time goes: the key
probe (torch's files, not an import), getting the wheel (the build, or the wheelhouse's hash
check) and installing it, and the load check after the stage, which imports torch in the env
whichever source the wheel came from. The ratio of the wheel + install phases is printed beside
the whole stage's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from kernellab import STANDIN, install_argv, make_sdist  # noqa: E402
from verlrepo import make_verl_repo  # noqa: E402

TOOL = str(Path(sys.executable).parent / "verl-bootstrap")


def stage_seconds(prefix: Path, repo: Path, env: dict[str, str]) -> tuple[float, dict[str, float]]:
    """The kernel stage's seconds in one install of the kernel-stage profile, and its phases."""
    # the disk check is skipped: it counts a full env, where uv hardlinks torch from its cache
    argv = [TOOL, *install_argv(prefix, repo), "--skip-check", "disk", "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    body = json.loads(done.stdout)
    if "steps" not in body:
        raise SystemExit(f"the install did not run: {body.get('error')}")
    steps = {s["id"]: s for s in body["steps"]}
    if steps["standin"]["status"] != "done":
        raise SystemExit(f"the kernel stage failed: {steps['standin']}")
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text(encoding="utf-8"))
    phases = state["steps"]["standin"]["outputs"]["kernel"]["phase_seconds"]
    return float(steps["standin"]["seconds"]), {k: float(v) for k, v in phases.items()}


def rows(
    built: tuple[float, dict[str, float]], warm: tuple[float, dict[str, float]]
) -> list[tuple[str, float, float | None]]:
    """The table: each route's whole stage, then its phases, with the build/wheelhouse ratios."""
    (b_total, b), (w_total, w) = built, warm
    b_get, w_get = b["wheel"] + b["install"], w["wheel"] + w["install"]
    return [
        ("source build, published to the wheelhouse: whole stage", b_total, None),
        ("  probe the env's build key", b["key probe"], None),
        ("  build the wheel + install it", b_get, None),
        ("  load check after the stage (imports torch)", b["load check"], None),
        ("from the warm wheelhouse (no compiler): whole stage", w_total, b_total / w_total),
        ("  probe the env's build key", w["key probe"], None),
        ("  hash-check the wheel + install it", w_get, b_get / w_get),
        ("  load check after the stage (imports torch)", w["load check"], None),
    ]


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
        print(f"{'stand-in kernel stage':66} {'seconds':>8} {'x faster than build':>20}")
        for name, seconds, ratio in rows(built, warm):
            shown = f"{ratio:.1f}x" if ratio else ""
            print(f"{name:66} {seconds:8.2f} {shown:>20}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
