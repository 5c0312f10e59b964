"""Said once, where it matters: the plan's index flags once and each install's packages first; a
note about an unreachable optional index once per run and never on a refused run; an env keeps
the log folders of its last runs only; the project's metadata builds with no warning."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scaffold import run

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED
from verl_bootstrap.paths import guard_file
from verl_bootstrap.run.runner import KEEP_RUN_LOGS, _prune_logs
from verl_bootstrap.run.state.guard import guarding

ROOT = Path(__file__).resolve().parents[1]
MIRROR = "http://127.0.0.1:9/simple"  # nothing listens: only the plan's text is checked


def test_the_plan_says_the_index_flags_once_and_the_packages_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", MIRROR)
    # the resolving route: its stage lines name the pins (a locked one names its requirements file)
    argv = ["plan", "--profile", "cpu", "--prefix", str(tmp_path / "env"), "--resolve"]
    code, text, _ = run(argv, capsys)
    assert code == EXIT_OK
    assert text.count(MIRROR) == 1  # in the one [index flags] line
    torch = next(line for line in text.splitlines() if "torch==" in line and "$ " in line)
    assert torch.split(" pip install ", 1)[1].startswith("torch==")
    assert "[index flags]" in torch
    _, body, _ = run([*argv, "--json"], capsys)
    installs = [c for s in json.loads(body)["steps"] for c in s["commands"] if "install" in c]
    assert all(MIRROR in c for c in installs)  # the JSON plan keeps every command whole


def test_a_run_refused_by_the_prefix_lock_says_no_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "env"
    # an optional index nothing answers: the plan notes it
    profile = tmp_path / "p.yaml"
    shipped = (ROOT / "profiles" / "cpu.yaml").read_text(encoding="utf-8")
    profile.write_text(shipped.replace("https://download.pytorch.org/whl/cpu", MIRROR))
    code, text, _ = run(["plan", "--profile", str(profile), "--prefix", str(prefix)], capsys)
    assert code == EXIT_OK and "is unreachable" in text
    prefix.mkdir()
    with guarding(guard_file(prefix), wait=0.0):
        code, _, err = run(
            ["--profile", str(profile), "--prefix", str(prefix), "--no-preflight"], capsys
        )
    assert code == EXIT_REFUSED, err
    assert "unreachable" not in err


def test_an_env_keeps_only_its_last_run_logs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    names = [f"20261204-1200{n:02d}-{100 + n}" for n in range(KEEP_RUN_LOGS + 5)]
    for name in names:
        (logs / name).mkdir(parents=True)
    (logs / "verl-tests-20261204.log").write_text("a test run's log stays")
    _prune_logs(logs, keep=KEEP_RUN_LOGS)
    kept = sorted(p.name for p in logs.iterdir() if p.is_dir())
    assert kept == names[-KEEP_RUN_LOGS:]
    assert (logs / "verl-tests-20261204.log").is_file()


def test_the_license_is_an_spdx_expression() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^license = "Apache-2.0"$', text, re.M)


def test_building_the_project_prints_no_warning_from_its_metadata(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "project.license" not in done.stderr
    assert "Deprecat" not in done.stderr
