"""A failed check of an env ends with the command that fixes it, where one exists, for real on a
tiny env (tests/tinyenv.py) damaged by hand: `verify` and `envs list` check the env against its
record as every run does (run.repair), say what changed and give the command that repairs it,
which then does; where nothing changed that a re-run could put back, they say so and point at
doctor. A re-run after a failed `verify` checks the env again rather than call it verified."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scaffold import Ran, invoke, run_cli
from tinyenv import tiny_parts

from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED
from verl_bootstrap.installer.cmdline import uv_binary


@dataclass(frozen=True)
class Tiny:
    prefix: Path
    argv: list[str]

    def listed(self) -> dict[str, Any]:
        """This env's entry in `envs list --json` (the session's tool home lists others too)."""
        done = run_cli(["envs", "list", "--no-size"])
        (entry,) = [e for e in done.body["envs"] if e["prefix"] == str(self.prefix)]
        return dict(entry)

    def listed_text(self) -> list[str]:
        done = invoke(["envs", "list", "--no-size"])
        return [line for line in done.out.splitlines() if str(self.prefix) in line]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tiny]:
    root = tmp_path_factory.mktemp("way-out")
    prefix = root / "env"
    with pytest.MonkeyPatch.context() as patch:
        parts = tiny_parts(root, patch)
        argv = ["--profile", str(parts.profile), "--prefix", str(prefix)]
        argv += ["--verl-source", str(parts.repo), "--cuda", "cpu"]
        made = invoke(argv)
        assert made.code == EXIT_OK, made.err
        yield Tiny(prefix, argv)


def _verify(prefix: Path) -> Ran:
    return invoke(["verify", "--prefix", str(prefix)])


def test_a_verify_failed_by_a_missing_package_ends_with_the_command_that_repairs_it(
    tiny: Tiny,
) -> None:
    python = str(tiny.prefix / "bin" / "python")
    subprocess.run([uv_binary(), "pip", "uninstall", "--python", python, "vbtiny"], check=True)
    failed = _verify(tiny.prefix)
    assert failed.code == EXIT_STEP_FAILED
    lines = failed.out.splitlines()
    fix = f"repair it: verl-bootstrap --prefix {tiny.prefix}"
    assert lines[-3:] == [
        "verification FAILED",
        "it differs from its record: vbtiny 1.0 is missing",
        fix,
    ]
    record = tiny.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml"  # it resolved
    against = invoke(["verify", "--prefix", str(tiny.prefix), "--against", str(record)])
    assert against.code == EXIT_STEP_FAILED and against.out.splitlines()[-1] == fix
    entry = tiny.listed()  # `envs list` shows the drift, not the last verify's verdict
    assert entry["status"] == "drifted" and entry["drift"] == ["vbtiny 1.0 is missing"]
    assert any(line.endswith(fix) for line in tiny.listed_text())
    info = invoke(["info", "--prefix", str(tiny.prefix)]).out.splitlines()
    assert info[:3] == [
        f"env {tiny.prefix}: drifted",
        "  drift     vbtiny 1.0 is missing",
        f"  repair    verl-bootstrap --prefix {tiny.prefix}",
    ]
    repaired = invoke(fix.removeprefix("repair it: verl-bootstrap ").split())
    assert repaired.code == EXIT_OK, repaired.err
    assert _verify(tiny.prefix).out.splitlines()[-1] == "verified"
    assert tiny.listed()["status"] == "ok" and tiny.listed()["drift"] == []


def test_an_env_changed_by_hand_is_drifted_in_envs_list_though_its_last_verify_passed(
    tiny: Tiny,
) -> None:
    assert _verify(tiny.prefix).code == EXIT_OK
    python = str(tiny.prefix / "bin" / "python")
    subprocess.run([uv_binary(), "pip", "uninstall", "--python", python, "vbtiny"], check=True)
    assert tiny.listed()["status"] == "drifted"
    assert invoke(tiny.argv).code == EXIT_OK  # the repair
    assert tiny.listed()["status"] == "ok"


def test_a_failure_no_reinstall_would_fix_points_at_doctor_and_a_rerun_checks_again(
    tiny: Tiny,
) -> None:
    """The package's files damaged, its dist-info intact: the record check sees nothing, so no
    reinstall is offered; the install run again re-verifies instead of saying `verified.`"""
    (package,) = tiny.prefix.glob("lib/python*/site-packages/vbtiny")
    shutil.move(package, tiny.prefix / "vbtiny-moved")
    try:
        failed = _verify(tiny.prefix)
        assert failed.code == EXIT_STEP_FAILED
        doctor = f"verl-bootstrap doctor --prefix {tiny.prefix}"
        assert failed.out.splitlines()[-1] == (
            f"its packages match its record: look for the cause with `{doctor}`"
        )
        assert tiny.listed()["status"] == "verify failed"
        again = invoke(tiny.argv)
        assert again.code == EXIT_STEP_FAILED, again.err  # checked again: still broken
        assert "step 'verify' failed" in again.err
    finally:
        shutil.move(tiny.prefix / "vbtiny-moved", package)
    assert invoke(tiny.argv).code == EXIT_OK
    assert tiny.listed()["status"] == "ok"
