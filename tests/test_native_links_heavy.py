"""Heavy tier: `lock --check --links` on the real wheels of TransformerEngine's core and of the
CUDA libraries it needs, read from the wheels alone, on any host. The megatron cu130 lock's core
(transformer-engine-cu13 2.16.1, 190 MB) needs a cuBLASLt symbol that torch 2.11's cuBLAS
(nvidia-cublas 13.1.0.3, 423 MB) lacks; TransformerEngine's CUDA 12 core (transformer-engine-cu12
2.16.1, 302 MB: the megatron cu128 lock's, which that sdist's requirements once brought into the
cu130 lock too) needs `libcublas.so.12` and `libcublasLt.so.12`, which no wheel of a CUDA 13 lock
has. Each lock also keeps the core's cudart and cuDNN (nvidia-cudnn-cu13 9.19.0.56, 366 MB), so
that what is named is only what the whole lock lacks: 1.28 GB downloaded once, then read from
the cache. Run: `.venv/bin/pytest -m heavy tests/test_native_links_heavy.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from scaffold import run_cli

from verl_bootstrap.paths import LOCKFILES_DIR

pytestmark = pytest.mark.heavy

CORE = "transformer_engine/wheel_lib/libtransformer_engine.so"
MISSING = (
    f"{CORE} (transformer-engine-cu13 2.16.1) needs cublasLtGroupedMatrixLayoutInit_internal at "
    "version libcublasLt.so.13 of libcublasLt.so.13, which nvidia-cublas 13.1.0.3 does not "
    "define: loading it fails with `undefined symbol`"
)
CUDA_12_CORE = (
    f"{CORE} (transformer-engine-cu12 2.16.1) needs libcublas.so.12, libcudart.so.12 and "
    "libcublasLt.so.12, which nothing in the lock provides (it has libcublas.so.13, "
    "libcudart.so.13 and libcublasLt.so.13): loading it fails with `libcublas.so.12: cannot open "
    "shared object file`"
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tool's cache, one for the module: each wheel is downloaded once."""
    return tmp_path_factory.mktemp("cache")


def _lock(name: str) -> dict[str, Any]:
    text = (LOCKFILES_DIR / "megatron" / name).read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def _kept(folder: Path, kept: list[dict[str, Any]]) -> Path:
    """The committed megatron cu130 lock with only `kept` left of its wheels (each stage's other
    distributions dropped; `kept` in place of the transformer-engine stage's), where
    `lock --check` looks for it."""
    data = _lock("cu130-linux-64.lock.yaml")
    for stage in data["stages"]:
        if stage["id"] == "transformer-engine":
            stage["distributions"] = kept
        elif stage["id"] != "install-verl":
            stage["distributions"] = []
    data["stages"] = [s for s in data["stages"] if s["distributions"]]
    path = folder / "megatron" / "cu130-linux-64.lock.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return folder


def _dist(lock: str, name: str) -> dict[str, Any]:
    stages = _lock(lock)["stages"]
    found: dict[str, Any] = next(d for s in stages for d in s["distributions"] if d["name"] == name)
    return found


def _links(folder: Path, *extra: str) -> list[str]:
    run = run_cli(["lock", "--check", "--links", "--dir", str(folder), "--json", *extra])
    [entry] = run.body["lockfiles"]
    links: list[str] = entry["native_links"]
    return links


def _cuda_13(core: str, lock: str = "cu130-linux-64.lock.yaml") -> list[dict[str, Any]]:
    """`core` (from `lock`) with the cu130 lock's cuBLAS, cudart and cuDNN."""
    cu130 = "cu130-linux-64.lock.yaml"
    cuda = ("nvidia-cublas", "nvidia-cuda-runtime", "nvidia-cudnn-cu13")
    return [_dist(cu130, name) for name in cuda] + [_dist(lock, core)]


def test_the_te_core_does_not_link_against_torchs_cublas(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(cache))
    kept = _cuda_13("transformer-engine-cu13")
    folder = _kept(tmp_path / "lockfiles", kept)
    assert _links(folder) == [MISSING]
    # what was read, by each wheel's sha256; the wheels are gone
    read = {p.stem for p in (cache / "native-links").glob("*.json")}
    assert {d["hashes"][0] for d in kept} <= read
    assert not list(tmp_path.rglob("*.whl"))
    assert _links(folder, "--offline") == [MISSING]  # read from the cache alone


def test_a_cuda_12_core_beside_cuda_13s_libraries_is_named(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(cache))
    kept = _cuda_13("transformer-engine-cu12", "cu128-linux-64.lock.yaml")
    assert _links(_kept(tmp_path / "lockfiles", kept)) == [CUDA_12_CORE]
