"""A `script` stage whose script fails silently is still caught, for real.

verl's scripts/install_vllm_sglang_mcore.sh has no `set -e`: a failed `pip install` in it is
followed by `echo "Successfully installed all packages"` and exit 0. The stage runs it under
`bash -eE -o pipefail`, which stops at the failing command; and a failure the script swallows
itself (`|| true`) is caught by the stage's `expect:` check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scaffold import run
from verlrepo import git

from verl_bootstrap.errors import EXIT_STEP_FAILED
from verl_bootstrap.installer.envs.inventory import installed

DATA = Path(__file__).parent / "data" / "profiles"
SCRIPT = "scripts/install_vllm_sglang_mcore.sh"
MISSING = "verl-bootstrap-test-no-such-engine"

# verl's release sdist (and so the test repo) has no scripts/: this stands in for verl's script,
# with its shape: no `set -e`, pip installs one after another, and a success line at the end.
VERL_LIKE_SCRIPT = """#!/bin/bash
USE_MEGATRON=${USE_MEGATRON:-1}
echo "1. install inference frameworks and pytorch they need"
pip install --no-cache-dir "six==1.17.0"
pip install --no-cache-dir "MISSING==1.0"SWALLOW
echo "Successfully installed all packages"
"""


def add_script(repo: Path, *, swallow: bool) -> None:
    """Commit the script to the repo and move the v0.9.1 tag onto that commit."""
    path = repo / SCRIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    text = VERL_LIKE_SCRIPT.replace("MISSING", MISSING)
    path.write_text(text.replace("SWALLOW", " || true" if swallow else ""))
    git(repo, "add", SCRIPT)
    git(repo, "commit", "-q", "-m", "add verl's engine install script (absent from the sdist)")
    git(repo, "tag", "-f", "v0.9.1")


def install(tmp_path: Path, repo: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Run the script-stage profile from `repo`; return the JSON report (exit code checked)."""
    folder = Path(shutil.copytree(DATA / "script-stage", tmp_path / "script-stage"))
    argv = [
        "--profile",
        str(folder / "profile.yaml"),
        "--prefix",
        str(tmp_path / "env"),
        "--verl-source",
        str(repo),
        "--json",
    ]
    code, out, _ = run(argv, capsys)
    body: dict[str, Any] = json.loads(out)
    assert code == EXIT_STEP_FAILED, body
    return body


def steps_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in body["steps"]}


def test_a_failing_command_in_the_script_fails_the_stage(
    tmp_path: Path, verl_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_script(verl_repo, swallow=False)
    steps = steps_of(install(tmp_path, verl_repo, capsys))
    prefix = tmp_path / "env"
    engines = steps["engines"]
    assert engines["status"] == "failed"
    assert engines["reason"] == (
        f"command failed with exit code 1: bash -eE -o pipefail {prefix / 'src/verl' / SCRIPT}"
    )
    assert steps["record-lock"]["status"] == "aborted"
    assert steps["verify"]["status"] == "aborted"
    log = Path(engines["log"]).read_text(encoding="utf-8")
    assert MISSING in log
    assert "Successfully installed all packages" not in log  # bash stopped at the failure
    assert installed(prefix)["six"].version == "1.17.0"  # the command before it did run

    # The same script, run the way its README says (plain bash), claims success: exit 0.
    plain = subprocess.run(
        ["bash", str(prefix / "src" / "verl" / SCRIPT)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": f"{prefix / 'bin'}{os.pathsep}{os.environ['PATH']}"},
    )
    assert plain.returncode == 0
    assert "Successfully installed all packages" in plain.stdout


def test_a_failure_the_script_swallows_is_caught_by_expect(
    tmp_path: Path, verl_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_script(verl_repo, swallow=True)
    steps = steps_of(install(tmp_path, verl_repo, capsys))
    engines = steps["engines"]
    assert engines["status"] == "failed"
    assert engines["reason"] == (
        "stage 'engines' finished but did not install what it promised: "
        f"{MISSING} is not installed (expected ==1.0)"
    )
    assert steps["verify"]["status"] == "aborted"
    log = Path(engines["log"]).read_text(encoding="utf-8")
    assert "Successfully installed all packages" in log  # the script itself exited 0
    assert "[exit 0]" in log
