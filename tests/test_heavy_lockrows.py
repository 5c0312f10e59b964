"""What a heavy tier's locked row installs (bench/heavylock.py), checked without installing it:
the committed megatron cu130 lock less each kernel stage whose prebuilt wheel cannot be had.

Real files and real answers: the committed lock and profile, a host name that never resolves
(`.invalid`), a loopback server that has one wheel and not another, and the tool's own `plan`
reading what was derived."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopback import base_url, serve
from scaffold import tool_json

from bench.heavylock import Derived, derive
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.stacks import apply_stack

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "lockfiles" / "megatron" / "cu130-linux-64.lock.yaml"
FLASH = "https://kernels.invalid/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
TE = "https://kernels.invalid/transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl"


def _plan(flash: str, te: str) -> dict[str, object]:
    """The kernel part of `plan --json`: each kernel stage's chosen wheel and its source."""
    return {
        "steps": [
            {"id": "engine"},
            {"id": "flash-attn", "kernel": {"wheel": flash, "origin": "verl-wheelhouse"}},
            {"id": "transformer-engine", "kernel": {"wheel": te, "origin": "verl-wheelhouse"}},
        ]
    }


def _derive(plan: dict[str, object], folder: Path) -> Derived:
    lock = read_lockfile(LOCK)
    return derive(apply_stack(load_profile("megatron"), None), "cu130", lock, plan, folder)


def test_an_unreachable_kernel_wheel_leaves_its_stage_out_named_and_the_rest_locked(
    tmp_path: Path,
) -> None:
    derived = _derive(_plan(FLASH, TE), tmp_path / "d")
    gaps = {g.stage: g for g in derived.left_out}
    assert set(gaps) == {"flash-attn", "transformer-engine"} and derived.refused == ()
    assert gaps["flash-attn"].distributions == ("flash-attn",)
    # verl's whole TransformerEngine wheel stands for the three it replaces: none of them stays
    assert gaps["transformer-engine"].distributions == (
        "transformer-engine",
        "transformer-engine-cu13",
        "transformer-engine-torch",
    )
    assert "kernels.invalid: " in gaps["flash-attn"].note()
    assert "unreachable here" in gaps["flash-attn"].note()
    lock = read_lockfile(derived.lockfile)
    stages = {s.id: [d.name for d in s.distributions] for s in lock.stages}
    assert "flash-attn" not in stages and stages["transformer-engine"] == ["nvdlfw-inspect"]
    committed = {s.id: s for s in read_lockfile(LOCK).stages}
    assert all(s == committed[s.id] for s in lock.stages if s.id != "transformer-engine")
    # the tool takes the derived pair as a current lock of its profile (no --frozen)
    argv = ["plan", "--profile", str(derived.profile), "--lockfile", str(derived.lockfile)]
    argv += ["--cuda", "cu130", "--backend", "venv", "--prefix", str(tmp_path / "e"), "--json"]
    code, plan, stderr = tool_json(*argv, timeout=300)
    assert code == 0, stderr
    assert plan["route"]["kind"] == "lockfile"
    assert [s["id"] for s in plan["steps"]][-4:] == [
        "transformer-engine",
        "megatron-bridge",
        "record-lock",
        "verify",
    ]


def test_a_wheel_whose_host_answers_keeps_its_stage_and_an_error_status_is_refused(
    tmp_path: Path,
) -> None:
    root = tmp_path / "served"
    root.mkdir()
    (root / "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl").write_bytes(b"PK")
    server = serve(root)
    try:
        base = base_url(server)
        flash = f"{base}/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
        derived = _derive(_plan(flash, f"{base}/missing.whl"), tmp_path / "d")
    finally:
        server.shutdown()
    assert derived.left_out == ()
    assert derived.refused == (
        f"stage transformer-engine: its prebuilt wheel {base}/missing.whl answers HTTP 404",
    )
    assert [s.id for s in read_lockfile(derived.lockfile).stages] == [
        s.id for s in read_lockfile(LOCK).stages
    ]


@pytest.fixture(scope="module")
def unreachable(tmp_path_factory: pytest.TempPathFactory) -> Derived:
    return _derive(_plan(FLASH, TE), tmp_path_factory.mktemp("unreachable"))


@pytest.mark.parametrize(
    ("check", "detail", "stage"),
    [
        ("import flash_attn", "ModuleNotFoundError: No module named 'flash_attn'", "flash-attn"),
        (
            "import transformer_engine.pytorch",
            "Traceback ...\nModuleNotFoundError: No module named 'transformer_engine'",
            "transformer-engine",
        ),
        # the env's own failures stay failures: a symbol its libraries lack, a module no stage
        # left out brings, a check that is not an import
        (
            "import transformer_engine",
            "OSError: libtransformer_engine.so: undefined symbol: "
            "cublasLtGroupedMatrixLayoutInit_internal, version libcublasLt.so.13",
            None,
        ),
        ("import numba", "ModuleNotFoundError: No module named 'numba'", None),
        ("uv pip check", "ModuleNotFoundError: No module named 'flash_attn'", None),
    ],
)
def test_only_a_module_a_left_out_stage_brings_explains_a_failed_import(
    unreachable: Derived, check: str, detail: str, stage: str | None
) -> None:
    assert unreachable.explains(check, detail) == stage
