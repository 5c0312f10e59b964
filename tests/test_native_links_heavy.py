"""Heavy tier: `lock --check --links` on the real wheels of the megatron cu130 lock's
TransformerEngine core and cuBLAS (transformer-engine-cu13 2.16.1, 190 MB, and nvidia-cublas
13.1.0.3, torch 2.11's pin, 423 MB: 613 MB downloaded once, then read from the cache). The core
needs a cuBLASLt symbol that cuBLAS release lacks; the check names it from the ELF files alone,
on any host. Run: `.venv/bin/pytest -m heavy tests/test_native_links_heavy.py`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from scaffold import run_cli

from verl_bootstrap.paths import LOCKFILES_DIR

pytestmark = pytest.mark.heavy

KEPT = {"nvidia-cublas", "transformer-engine-cu13"}
MISSING = (
    "transformer_engine/wheel_lib/libtransformer_engine.so (transformer-engine-cu13 2.16.1) needs "
    "cublasLtGroupedMatrixLayoutInit_internal at version libcublasLt.so.13 of libcublasLt.so.13, "
    "which nvidia-cublas 13.1.0.3 does not define: loading it fails with `undefined symbol`"
)


def _two_wheels(folder: Path) -> Path:
    """The committed megatron cu130 lock with only the TE core and cuBLAS left (each stage's
    other distributions dropped), where `lock --check` looks for it."""
    data = yaml.safe_load((LOCKFILES_DIR / "megatron" / "cu130-linux-64.lock.yaml").read_text())
    for stage in data["stages"]:
        if stage["id"] != "install-verl":
            stage["distributions"] = [d for d in stage["distributions"] if d["name"] in KEPT]
    data["stages"] = [s for s in data["stages"] if s["distributions"]]
    path = folder / "megatron" / "cu130-linux-64.lock.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return folder


def _links(folder: Path, *extra: str) -> list[str]:
    run = run_cli(["lock", "--check", "--links", "--dir", str(folder), "--json", *extra])
    [entry] = run.body["lockfiles"]
    links: list[str] = entry["native_links"]
    return links


def test_the_te_core_does_not_link_against_torchs_cublas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    folder = _two_wheels(tmp_path / "lockfiles")
    assert _links(folder) == [MISSING]
    cached = sorted((tmp_path / "cache" / "native-links").glob("*.json"))
    assert len(cached) == 2  # what was read, by each wheel's sha256; the wheels are gone
    assert not list(tmp_path.rglob("*.whl"))
    assert _links(folder, "--offline") == [MISSING]  # read from the cache alone
