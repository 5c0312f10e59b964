"""An env's truth is checked on every run, for real: a tiny env (tests/tinyenv.py) damaged by
hand (a distribution uninstalled, its files replaced, its record naming a stage the plan lacks)
is repaired by the same command that made it, or the run says it cannot and is not verified;
`--force STEP` re-records the env, so `verify --against` finds no false difference after it."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scaffold import Ran, invoke
from test_lifecycle import state, versions
from tinyenv import HOST_XY, publish_wheel, tiny_parts
from verlrepo import git

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED, EXIT_STEP_FAILED
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.paths import env_lockfile

RECORDED = ["tiny", "record-lock", "verify"]  # the stage, then what depends on it


@dataclass(frozen=True)
class Tiny:
    prefix: Path
    argv: list[str]

    def again(self, *extra: str) -> Ran:
        return invoke([*self.argv, *extra, "--json"])

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
        made = invoke(argv)
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
    against = invoke(
        ["verify", "--prefix", str(tiny.prefix), "--against", str(env_lockfile(tiny.prefix))]
    )
    assert against.code != EXIT_OK
    assert "vbtiny" in against.out + against.err
    info = invoke(["info", "--prefix", str(tiny.prefix), "--json"]).json()  # recorded, as a verify
    assert (info["status"], info["verified"]["failed"]) == ("drifted", ["other-hash vbtiny"])
    assert info["verified"]["against"] == str(env_lockfile(tiny.prefix))
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
    against = invoke(
        ["verify", "--prefix", str(tiny.prefix), "--against", str(env_lockfile(tiny.prefix))]
    )
    assert against.code == EXIT_OK, against.out + against.err
    shown = invoke([*tiny.argv, "--force", "verify"])  # a run that did work: its size is walked
    assert re.search(r"\n  env: [0-9]+ packages, [0-9.]+ (B|KiB|MiB|GiB)\n", shown.err)


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
        text = invoke(tiny.argv)
        assert "not verified: the env differs from its record" in text.err
        assert "verified." not in text.err
    finally:
        lockfile.write_text(kept, encoding="utf-8")
    repaired = tiny.again()
    assert repaired.code == EXIT_OK, repaired.err
    assert versions(tiny.prefix)["vbtiny"] == "1.0"


def listed(prefix: Path) -> dict[str, Any]:
    envs = invoke(["envs", "list", "--json", "--no-size"]).json()["envs"]
    return next(e for e in envs if e["prefix"] == str(prefix))


def test_a_standalone_verify_is_recorded_and_a_failed_one_is_not_ok(tiny: Tiny) -> None:
    tiny.uninstall("vbtiny")
    failed = invoke(["verify", "--prefix", str(tiny.prefix)])
    assert failed.code == EXIT_STEP_FAILED
    assert listed(tiny.prefix)["status"] == "drifted"  # the record check says why (test_way_out)
    assert listed(tiny.prefix)["verified_at"] is None
    info = invoke(["info", "--prefix", str(tiny.prefix), "--json"]).json()
    assert (info["status"], info["verified"]["ok"]) == ("drifted", False)
    assert info["verified"]["failed"] == ["import vbtiny"]
    text = invoke(["info", "--prefix", str(tiny.prefix)]).out
    assert "  verify    FAILED: import vbtiny, " in text
    assert tiny.again().code == EXIT_OK  # the re-run repairs it, and is the env's news now
    assert listed(tiny.prefix)["status"] == "ok"
    passed = invoke(["verify", "--prefix", str(tiny.prefix)])
    assert passed.code == EXIT_OK, passed.out
    info = invoke(["info", "--prefix", str(tiny.prefix), "--json"]).json()
    assert (info["status"], info["verified"]["ok"]) == ("ok", True)
    assert listed(tiny.prefix)["verified_at"] == info["verified"]["at"]


STACKED = """schema_version: 1
name: tinystack
python: {{requires: ">=3.10,<3.14", prefer: "{python}"}}
env: {{backend: venv}}
cuda_variants:
  cpu: {{description: no CUDA}}
stages:
  - {{id: tiny, packages: ["vbtiny==1.1"]}}
verify: {{imports: [vbtiny], versions: {{vbtiny: "==1.1"}}, gpu_smoke: false, bf16: false}}
disk_gb: 0.1  # measured: under 1 MB of its own
stacks:
  - refs: [v0.9.0]
    stages:
      - {{id: tiny, packages: ["vbtiny==1.0"]}}
    verify: {{imports: [vbtiny], versions: {{vbtiny: "==1.0"}}, gpu_smoke: false, bf16: false}}
"""


def test_verify_checks_the_stack_of_the_ref_the_env_was_made_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = tiny_parts(tmp_path, monkeypatch)
    git(parts.repo, "tag", "v0.9.0")
    profile = tmp_path / "tinystack.yaml"
    profile.write_text(STACKED.format(python=HOST_XY), encoding="utf-8")
    prefix = tmp_path / "old"
    argv = ["--profile", str(profile), "--prefix", str(prefix), "--verl-source", str(parts.repo)]
    made = invoke([*argv, "--verl-ref", "v0.9.0", "--cuda", "cpu"])
    assert made.code == EXIT_OK, made.err
    verified = invoke(["verify", "--prefix", str(prefix), "--json"])
    assert verified.code == EXIT_OK, verified.out
    checks = {c["name"]: c for c in verified.json()["checks"]}
    assert checks["version vbtiny"]["status"] == "ok"  # ==1.0, v0.9.0's, not the profile's 1.1
    assert "==1.0" in checks["version vbtiny"]["detail"]


CPU_ONLY = """schema_version: 1
name: cpuonly
python: {{requires: ">=3.10,<3.14", prefer: "{python}"}}
env: {{backend: venv}}
indexes:
  pytorch-cpu: {{url: "{index}", optional: true}}
cuda_variants:
  cpu: {{description: no CUDA}}
stages:
  - {{id: torch, packages: ["torch=={torch}"], index: pytorch-cpu, no_deps: true}}
verify: {{imports: [torch], gpu_smoke: false, bf16: false}}
disk_gb: 0.1  # measured: not installed by these tests
"""


def closed_loopback_url() -> str:
    """A loopback URL nothing listens on: the CPU index that does not answer."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple/"


def cpu_only(tmp_path: Path, torch: str) -> Path:
    profile = tmp_path / f"cpuonly-{torch}.yaml"
    text = CPU_ONLY.format(python=HOST_XY, index=closed_loopback_url(), torch=torch)
    profile.write_text(text, encoding="utf-8")
    return profile


def test_no_cpu_torch_reachable_refuses_before_anything_is_downloaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # the default index alone: CUDA builds
    # torch 2.8.0: the default index has only its CUDA build; the CPU index does not answer
    profile, prefix = cpu_only(tmp_path, "2.8.0"), tmp_path / "env"
    argv = ["--profile", str(profile), "--prefix", str(prefix), "--cuda", "cpu", "--json"]
    refused = invoke(argv)
    assert refused.code == EXIT_REFUSED, refused.err
    (failed,) = refused.json()["error"]["data"]["failed"]  # the preflight's one failed check
    assert failed["name"] == "cpu-torch"
    assert failed["data"] == {
        "pin": "torch==2.8.0",
        "resolved": "2.8.0",
        "cpu_index": "pytorch-cpu",
    }
    assert "--index pytorch-cpu=URL" in failed["fix"]
    assert not prefix.exists()  # nothing made, nothing downloaded
    doctor = invoke(["doctor", "--profile", str(profile), "--prefix", str(prefix), "--json"])
    checks = {c["name"]: c for c in doctor.json()["checks"]}
    assert checks["cpu-torch"]["status"] == "fail"


def test_a_cpu_torch_in_the_find_links_passes_the_same_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    publish_wheel(tmp_path / "wheels", "torch", "2.13.0+cpu")  # resolved by name, not installed
    profile = cpu_only(tmp_path, "2.13.0")
    doctor = invoke(
        ["doctor", "--profile", str(profile), "--prefix", str(tmp_path / "e"), "--json"]
    )
    checks = {c["name"]: c for c in doctor.json()["checks"]}
    assert checks["cpu-torch"]["status"] == "ok", checks["cpu-torch"]
    assert checks["cpu-torch"]["data"]["resolved"] == "2.13.0+cpu"
