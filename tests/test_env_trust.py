"""An env's truth is checked on every run, for real: a tiny env (tests/tinyenv.py) damaged by
hand (a distribution uninstalled, its files replaced, its record naming a stage the plan lacks)
is repaired by the same command that made it, or the run says it cannot and is not verified;
`--force STEP` re-records the env, so `verify --against` finds no false difference after it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_lifecycle import Ran, run, state, versions
from tinyenv import tiny_parts

from verl_bootstrap.commands import uv_binary
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED
from verl_bootstrap.paths import env_lockfile

RECORDED = ["tiny", "record-lock", "verify"]  # the stage, then what depends on it


@dataclass(frozen=True)
class Tiny:
    prefix: Path
    argv: list[str]

    def again(self, *extra: str) -> Ran:
        return run([*self.argv, *extra, "--json"])

    def uninstall(self, name: str) -> None:
        python = str(self.prefix / "bin" / "python")
        subprocess.run([uv_binary(), "pip", "uninstall", "--python", python, name], check=True)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tiny]:
    root = tmp_path_factory.mktemp("trust")
    prefix = root / "env"
    with pytest.MonkeyPatch.context() as patch:
        parts = tiny_parts(root, patch)
        argv = ["--profile", str(parts.profile), "--prefix", str(prefix)]
        argv += ["--verl-source", str(parts.repo), "--cuda", "cpu"]
        made = run(argv)
        assert made.code == EXIT_OK, made.err
        yield Tiny(prefix, argv)


def ran(result: Ran) -> list[str]:
    return [s["id"] for s in result.json()["steps"] if s["status"] == "done"]


def test_an_intact_env_is_checked_and_every_step_skipped(tiny: Tiny) -> None:
    again = tiny.again()
    assert again.code == EXIT_OK, again.err
    assert ran(again) == []
    assert again.json()["drift"] == {"steps": [], "repaired": [], "cannot": []}
    assert again.json()["ok"] is True


def test_a_distribution_uninstalled_by_hand_is_put_back_and_verified(tiny: Tiny) -> None:
    tiny.uninstall("vbtiny")
    assert "vbtiny" not in versions(tiny.prefix)
    repaired = tiny.again()
    assert repaired.code == EXIT_OK, repaired.err
    assert ran(repaired) == RECORDED
    assert repaired.json()["drift"]["repaired"] == ["vbtiny 1.0 is missing: stage tiny runs again"]
    assert "repair: vbtiny 1.0 is missing: stage tiny runs again" in repaired.json()["notes"]
    assert repaired.json()["verify"]["ok"] is True
    assert versions(tiny.prefix)["vbtiny"] == "1.0"
    assert state(tiny.prefix)["last_run"]["status"] == "ok"


def test_files_replaced_since_install_are_installed_again(tiny: Tiny) -> None:
    record = next(tiny.prefix.glob("lib/python3*/site-packages/vbtiny-1.0.dist-info/RECORD"))
    record.write_text(record.read_text("utf-8") + "vbtiny/extra.py,,\n", encoding="utf-8")
    against = run(
        ["verify", "--prefix", str(tiny.prefix), "--against", str(env_lockfile(tiny.prefix))]
    )
    assert against.code != EXIT_OK
    assert "vbtiny" in against.out + against.err
    repaired = tiny.again()
    assert repaired.code == EXIT_OK, repaired.err
    assert repaired.json()["drift"]["repaired"] == [
        "vbtiny: files replaced since install: stage tiny runs again"
    ]
    assert ran(repaired) == RECORDED
    assert "vbtiny/extra.py" not in record.read_text("utf-8")  # the wheel's own RECORD again


def test_force_reruns_the_record_and_the_verification_so_nothing_differs(tiny: Tiny) -> None:
    forced = tiny.again("--force", "tiny")
    assert forced.code == EXIT_OK, forced.err
    assert ran(forced) == RECORDED
    against = run(
        ["verify", "--prefix", str(tiny.prefix), "--against", str(env_lockfile(tiny.prefix))]
    )
    assert against.code == EXIT_OK, against.out + against.err


def test_drift_no_stage_of_the_plan_repairs_is_said_and_not_verified(tiny: Tiny) -> None:
    lockfile = env_lockfile(tiny.prefix)
    kept = lockfile.read_text("utf-8")
    # the record says a stage this plan does not have installed vbtiny (as an option stage)
    lockfile.write_text(kept.replace("id: tiny", "id: gone"), encoding="utf-8")
    tiny.uninstall("vbtiny")
    try:
        refused = tiny.again()
        assert refused.code == EXIT_STEP_FAILED, refused.err
        assert refused.json()["ok"] is False
        assert refused.json()["drift"]["cannot"] == [
            "vbtiny 1.0 is missing: cannot be repaired here (stage gone is not in this run's plan)"
        ]
        assert state(tiny.prefix)["last_run"]["status"] == "failed"
        text = run(tiny.argv)
        assert "not verified: the env differs from its record" in text.err
        assert "verified." not in text.err
    finally:
        lockfile.write_text(kept, encoding="utf-8")
    repaired = tiny.again()
    assert repaired.code == EXIT_OK, repaired.err
    assert versions(tiny.prefix)["vbtiny"] == "1.0"
