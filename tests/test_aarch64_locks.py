"""The committed aarch64 (Grace-Hopper/Grace-Blackwell) lockfiles, proven from this x86 host:
every artifact each one locks is looked up on the configured indexes for linux-aarch64, exactly
as a `--locked` install on an aarch64 node does before it starts, and must be served with the
locked sha256. (`lock --check`, in the default suite, keeps them current with their profiles.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.lookup import hashed_dists, lookup, mismatches
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile import load_profile
from verl_bootstrap.siteconfig.apply import index_settings

LOCKFILES = Path(__file__).resolve().parents[1] / "lockfiles"
AARCH64 = sorted(LOCKFILES.glob("*/*-linux-aarch64.lock.yaml"))


def test_the_gpu_profiles_have_aarch64_lockfiles() -> None:
    """Which GPU profiles have one, and which cannot (docs/aarch64.md says why)."""
    locked = {(p.parent.name, p.name.split("-")[0]) for p in AARCH64}
    gpu = {"fsdp", "megatron", "sglang", "vllm-only"}
    assert {(name, "cu130") for name in gpu} == locked
    for path in AARCH64:
        lock = read_lockfile(path)
        assert lock.platform == "linux-aarch64" and lock.cuda.torch_cuda is not None
        assert "--platform linux-aarch64" in lock.regenerate and "--output" not in lock.regenerate


@pytest.mark.heavy
@pytest.mark.parametrize("path", AARCH64, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_aarch64_artifact_is_served_with_its_locked_hash(path: Path, tmp_path: Path) -> None:
    lock = read_lockfile(path)
    profile = load_profile(lock.profile)
    options = RunOptions(profile=lock.profile, prefix=tmp_path / "env", cuda=lock.cuda.variant)
    settings, _ = index_settings(profile, options)
    served = lookup(lock, settings, offline=False, work=tmp_path / "lookup")
    dists = hashed_dists(lock)
    assert mismatches(dists, served) == []
    wheels = [a for d in dists for a in served[d.name] if a.sha256 in d.hashes]
    machine_wheels = [a for a in wheels if not a.filename.endswith(("-any.whl", ".tar.gz"))]
    assert machine_wheels and all("aarch64" in a.filename for a in machine_wheels)
