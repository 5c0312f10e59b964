"""A real install of an older verl release with the stack it was made for.

The cpu profile at v0.7.1: a real local git repo made from verl 0.7.1's release sdist, the CLI a
user runs, and `verify` on the result: torch 2.8.0, numpy < 2 and transformers 4.57.1, both worker
modules of that release (fsdp_workers and engine_workers), resolved as of the day after the
release. On this host CPU torch 2.8.0 comes as the index's CUDA build (the PyTorch CPU index is
unreachable), so the env is large but installs from uv's cache in about a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from verlrepo import git, make_verl_repo

from installer.errors import EXIT_OK

REF = "v0.7.1"
CUTOFF = "2026-03-17T00:00:00Z"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """One install of the cpu profile at v0.7.1, shared by the assertions below."""
    root = tmp_path_factory.mktemp("older")
    repo = make_verl_repo(root / "verl", "0.7.1", REF)
    prefix = root / "env"
    argv = [sys.executable, "-m", "installer", "install", "--profile", "cpu", "--verl-ref", REF,
            "--verl-source", str(repo), "--prefix", str(prefix), "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    body = json.loads(done.stdout)
    return repo, prefix, body


def test_the_older_release_installs_and_verifies(
    installed: tuple[Path, Path, dict[str, Any]],
) -> None:
    _, _, body = installed
    assert body["ok"] is True
    checks = {c["name"]: c for c in body["verify"]["checks"]}
    for module in ("verl.workers.fsdp_workers", "verl.workers.engine_workers",
                   "verl.trainer.ppo.ray_trainer", "tensordict"):  # fmt: skip
        assert checks[f"import {module}"]["status"] == "ok", checks[f"import {module}"]
    assert checks["version torch"]["detail"].startswith("torch 2.8.0")
    assert checks["version transformers"]["detail"].startswith("transformers 4.57.1")
    assert checks["version numpy"]["detail"].startswith("numpy 1.")
    assert checks["uv pip check"]["status"] == "ok"


def test_the_lockfile_records_the_ref_its_commit_and_the_cutoff(
    installed: tuple[Path, Path, dict[str, Any]],
) -> None:
    repo, prefix, _ = installed
    lock = yaml.safe_load((prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml").read_text())
    assert lock["verl"]["ref"] == REF
    assert lock["verl"]["commit"] == git(repo, "rev-parse", "HEAD")
    assert lock["allow_unsupported_ref"] is False
    stages = {s["id"]: s for s in lock["stages"]}
    assert stages["verl-deps"]["env"]["UV_EXCLUDE_NEWER"] == CUTOFF
    assert "UV_EXCLUDE_NEWER" not in stages["torch"].get("env", {})  # PyTorch's index: no times
