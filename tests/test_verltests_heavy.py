"""Heavy: the cpu profile at every supported verl ref runs verl's own CPU suite with no env problem.

For each ref the cpu profile has a stack for: a real local repo from that release's sdist (the
sdist carries a subset of the ref's `*_on_cpu.py` files; a git checkout has them all: point
VERL_BOOTSTRAP_TEST_VERL_GIT at a local clone with tags to use it), an install with the test
tools (`--with-tests`), then `verl-bootstrap test` over every CPU test file of the checkout. The
refs before v0.9.0 pin torch 2.8.0, whose CPU build only the PyTorch CPU index serves: where it
is unreachable, the default index's CUDA build (about 7 GB) comes instead.

Each ref's row (files, passed, failed by class) goes to build/verl-tests/results.json, from which
docs/verl-tests.md's tables are written.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from scaffold import tool_json
from verlrepo import make_verl_repo

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.stacks import supported_refs

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "build" / "verl-tests" / "results.json"
GIT = os.environ.get("VERL_BOOTSTRAP_TEST_VERL_GIT")  # a local clone of verl with its tags


def _cli(*argv: str, timeout: float) -> tuple[int, dict[str, Any], str]:
    return tool_json(*argv, "--json", timeout=timeout)


def _source(ref: str, root: Path) -> tuple[Path, str]:
    """verl at `ref`: the local git clone when one is given, else the release's sdist."""
    if GIT:
        return Path(GIT), "git"
    return make_verl_repo(root / "verl", ref.lstrip("v"), ref), "sdist"


def _env_size(prefix: Path) -> str:
    """`du -sh` of the env (hardlinks from uv's cache counted once, as du counts them)."""
    done = subprocess.run(["du", "-sh", str(prefix)], capture_output=True, text=True, check=False)
    return done.stdout.split()[0] if done.stdout else "?"


def _record(row: dict[str, Any]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    rows = [r for r in rows if (r["ref"], r["source"]) != (row["ref"], row["source"])]
    RESULTS.write_text(json.dumps([*rows, row], indent=2, sort_keys=True))


@pytest.mark.timeout(7200)
@pytest.mark.parametrize("ref", supported_refs(load_profile("cpu")))
def test_the_cpu_env_runs_verls_cpu_suite_with_no_env_problem(ref: str, tmp_path: Path) -> None:
    repo, kind = _source(ref, tmp_path)
    prefix = tmp_path / "env"
    code, body, stderr = _cli(
        "install",
        "--profile",
        "cpu",
        "--verl-ref",
        ref,
        "--prefix",
        str(prefix),
        "--verl-source",
        str(repo),
        "--with-tests",
        timeout=3600,
    )
    assert code == EXIT_OK, stderr[-3000:]
    install_s = round(sum(step["seconds"] for step in body["steps"]))
    started = time.monotonic()
    code, body, stderr = _cli("test", "--prefix", str(prefix), timeout=7200)
    assert body, stderr[-3000:]
    _record(
        {
            "ref": ref,
            "source": kind,
            "files": len(body["files"]),
            "counts": body["counts"],
            "by_class": body["by_class"],
            "date": datetime.now(timezone.utc).date().isoformat(),
            "install_s": install_s,
            "env_size": _env_size(prefix),
            "test_s": round(time.monotonic() - started),
            "log": body["log"],
            "failures": [(f["nodeid"], f["cls"], f["rule"]) for f in body["failures"]],
            "env_failures": [f for f in body["failures"] if f["cls"] == "env"],
        }
    )
    assert body["by_class"]["env"] == 0, [f for f in body["failures"] if f["cls"] == "env"]
    assert code == EXIT_OK
