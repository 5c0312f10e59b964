"""Real installs of older verl releases with the stack each was made for.

The cpu profile, a real local git repo made from that release's sdist, the CLI a user runs, and
`verify` on the result, resolved as of the day after the release:

- v0.9.0 (default suite): v0.9.1's stack under v0.9.0's cutoff, with the CPU torch wheel the
  machine's pip settings carry, so it shares uv's cache with the other cpu installs.
- v0.7.1 (heavy): torch 2.8.0, numpy < 2 and transformers >= 5 (what its CPU workflow upgrades
  to), and both worker modules of that
  release (fsdp_workers and engine_workers). The PyTorch CPU index is unreachable here, so torch
  2.8.0 comes as the default index's CUDA build: about 7 GB, too much for the default suite's disk.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from scaffold import run_tool
from verlrepo import git, make_verl_repo

from verl_bootstrap.errors import EXIT_OK

Installed = tuple[Path, Path, dict[str, Any]]


def _install(factory: pytest.TempPathFactory, version: str) -> Installed:
    root = factory.mktemp(f"older-{version}")
    ref = f"v{version}"
    repo = make_verl_repo(root / "verl", version, ref)
    prefix = root / "env"
    argv = ["install", "--profile", "cpu", "--verl-ref", ref, "--verl-source", str(repo)]
    argv += ["--prefix", str(prefix), "--json"]
    done = run_tool(*argv, timeout=900, cwd=None)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    return repo, prefix, json.loads(done.stdout)


def _checks(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert body["ok"] is True
    return {c["name"]: c for c in body["verify"]["checks"]}


def _lock_records(installed: Installed, ref: str, cutoff: str) -> None:
    repo, prefix, _ = installed
    lock = yaml.safe_load((prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml").read_text())
    assert lock["verl"]["ref"] == ref
    assert lock["verl"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert lock["allow_unsupported_ref"] is False
    stages = {s["id"]: s for s in lock["stages"]}
    assert stages["verl-deps"]["env"]["UV_EXCLUDE_NEWER"] == cutoff
    assert "UV_EXCLUDE_NEWER" not in stages["torch"].get("env", {})  # PyTorch's index: no times


def _verl_version(prefix: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('verl'))"
    return subprocess.run(
        [str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


# ---------------------------------------------------------------------------------------------
# v0.9.0: in the default suite


@pytest.fixture(scope="module")
def v090(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """One install of the cpu profile at v0.9.0, shared by the assertions below."""
    return _install(tmp_path_factory, "0.9.0")


def test_v0_9_0_installs_and_verifies_with_its_own_stack(v090: Installed) -> None:
    _, prefix, body = v090
    checks = _checks(body)
    for module in ("verl.workers.engine_workers", "verl.trainer.ppo.ray_trainer", "tensordict"):
        assert checks[f"import {module}"]["status"] == "ok", checks[f"import {module}"]
    assert checks["version torch"]["detail"].startswith("torch 2.13.0")
    assert checks["uv pip check"]["status"] == "ok"
    assert _verl_version(prefix) == "0.9.0"


def test_v0_9_0_lockfile_records_the_ref_its_commit_and_the_cutoff(v090: Installed) -> None:
    _lock_records(v090, "v0.9.0", "2026-08-15T00:00:00Z")


# ---------------------------------------------------------------------------------------------
# v0.7.1: heavy (a multi-GB CUDA torch here)


@pytest.fixture(scope="module")
def v071(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """One install of the cpu profile at v0.7.1, shared by the assertions below."""
    return _install(tmp_path_factory, "0.7.1")


@pytest.mark.heavy
def test_v0_7_1_installs_and_verifies_with_its_own_stack(v071: Installed) -> None:
    _, prefix, body = v071
    checks = _checks(body)
    for module in (
        "verl.workers.fsdp_workers",
        "verl.workers.engine_workers",
        "verl.trainer.ppo.ray_trainer",
        "tensordict",
    ):
        assert checks[f"import {module}"]["status"] == "ok", checks[f"import {module}"]
    assert checks["version torch"]["detail"].startswith("torch 2.8.0")
    assert checks["version transformers"]["detail"].startswith("transformers 5.")
    assert checks["version numpy"]["detail"].startswith("numpy 1.")
    assert checks["uv pip check"]["status"] == "ok"
    assert _verl_version(prefix) == "0.7.1"


@pytest.mark.heavy
def test_v0_7_1_lockfile_records_the_ref_its_commit_and_the_cutoff(v071: Installed) -> None:
    _lock_records(v071, "v0.7.1", "2026-03-17T00:00:00Z")
