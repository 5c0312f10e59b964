"""verify imports what each backend runs, read from verl 0.9.1's real sdist; and `uv pip check`
knows verl's deps-free installs (its [[tool.uv.dependency-metadata]]) from a real env's real
`uv pip check` output."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from verlrepo import verl_pyproject_dir, verl_sdist

from verl_bootstrap.installer.cmdline import find_uv
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import LOCKFILES_DIR, PROBES, checkout_dir
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.verify.backends import (
    BACKEND_IMPORTS,
    ENGINE_IMPORTS,
    SINCE,
    VLLM,
    backend_imports,
)
from verl_bootstrap.verify.depsfree import deps_free
from verl_bootstrap.verify.env import verify_env


@pytest.fixture(scope="module")
def sdist_sources() -> dict[str, str]:
    """verl 0.9.1's Python files in its release sdist: module path -> source text."""
    out = {}
    with tarfile.open(verl_sdist(SINCE)) as tar:
        for member in tar.getmembers():
            inside = member.name.split("/", 1)[-1]
            if member.isfile() and inside.startswith("verl/") and inside.endswith(".py"):
                handle = tar.extractfile(member)
                assert handle is not None
                out[inside] = handle.read().decode("utf-8")
    return out


def _module_file(name: str, sources: dict[str, str]) -> str | None:
    base = name.replace(".", "/")
    return next((f for f in (f"{base}.py", f"{base}/__init__.py") if f in sources), None)


def test_each_backend_module_is_in_verls_sdist_and_each_name_is_one_verl_imports(
    sdist_sources: dict[str, str],
) -> None:
    for trigger, names in BACKEND_IMPORTS.items():
        assert _module_file(trigger, sdist_sources), trigger
        for name in names:
            module, _, attr = name.partition(":")
            if not attr:
                assert _module_file(module, sdist_sources), f"{module} is not in verl {SINCE}"
                continue
            pattern = re.compile(rf"from {re.escape(module)} import [^\n]*\b{attr}\b")
            users = [f for f, text in sdist_sources.items() if pattern.search(text)]
            assert users, f"verl {SINCE} imports no {attr} from {module}"


def test_the_sglang_packages_init_is_a_licence_header_alone(sdist_sources: dict[str, str]) -> None:
    """Why the package itself proves nothing: it imports nothing of SGLang."""
    init = sdist_sources["verl/workers/rollout/sglang_rollout/__init__.py"]
    assert not [ln for ln in init.splitlines() if ln.strip() and not ln.startswith("#")]
    assert "import sglang" in sdist_sources["verl/workers/rollout/sglang_rollout/sglang_rollout.py"]


@pytest.mark.parametrize(
    ("profile", "wanted"),
    [
        ("sglang", "verl.workers.rollout.sglang_rollout.async_sglang_server"),
        ("fsdp", "verl.workers.rollout.vllm_rollout.vllm_async_server"),
        ("vllm-only", "verl.workers.rollout.vllm_rollout.vllm_rollout"),
        ("megatron", "verl.models.mcore.bridge"),
        ("megatron", "verl.workers.config.megatron_peft"),
        ("megatron", "megatron.bridge.peft.utils:create_peft"),
    ],
)
def test_the_shipped_profiles_get_their_backends_modules(profile: str, wanted: str) -> None:
    assert wanted in backend_imports(load_profile(profile).verify.imports)


VLLM_FILES = Path(__file__).parent / "data" / "vllm" / f"vllm-{VLLM}-v1-sample-spec-decode.txt"


def test_each_engine_module_is_a_module_of_the_vllm_wheel_verl_pins() -> None:
    """Checked against the real vLLM wheel's file list (tests/data/vllm/NOTICE says how read)."""
    files = set(VLLM_FILES.read_text(encoding="utf-8").split())
    for name in ENGINE_IMPORTS["verl.workers.rollout.vllm_rollout"]:
        if name.startswith("vllm."):
            assert f"{name.replace('.', '/')}.py" in files, f"{name} is not in vLLM {VLLM}"
    lock = LOCKFILES_DIR / "vllm-only" / "cu130-linux-64.lock.yaml"
    assert read_lockfile(lock).distributions()["vllm"].version == VLLM  # what the locks pin


@pytest.mark.parametrize("profile", ["fsdp", "vllm-only", "megatron"])
def test_the_vllm_profiles_import_its_sampling_and_speculative_decoding_with_numba(
    profile: str,
) -> None:
    wanted = backend_imports(load_profile(profile).verify.imports)
    for name in ("vllm.v1.sample.sampler", "vllm.v1.spec_decode.ngram_proposer", "numba"):
        assert name in wanted, (profile, name)


def test_sglang_does_not_import_vllms_modules() -> None:
    assert not [m for m in backend_imports(load_profile("sglang").verify.imports) if "vllm" in m]


def _probe(python: Path, backend: list[str], since: str = SINCE) -> list[dict[str, object]]:
    request = {"imports": [], "gpu_smoke": False, "backend": {"since": since, "imports": backend}}
    done = subprocess.run(
        [str(python), str(PROBES / "verify_env.py"), json.dumps(request)],
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(done.stdout.split("@@VERIFY@@", 1)[1])
    items: list[dict[str, object]] = answer["backend"]
    return items


def test_a_name_verl_imports_inside_a_function_is_checked_on_its_module() -> None:
    loads, gone = _probe(Path(sys.executable), ["json:loads", "json:no_such_name"])
    assert loads["ok"] is True and loads["module"] == "json:loads"
    assert gone["ok"] is False
    assert gone["error"] == "ImportError: cannot import name 'no_such_name' from 'json'"


def _venv(prefix: Path, *packages: str) -> Path:
    """A real venv at `prefix` with `packages` installed without their dependencies, and verl's
    real pyproject.toml where a checkout would be."""
    uv = find_uv()
    assert uv is not None
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(prefix)], check=True)
    python = str(prefix / "bin" / "python")
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", python, "--no-deps", *packages], check=True
    )
    checkout_dir(prefix).mkdir(parents=True)
    pyproject = (verl_pyproject_dir(SINCE) / "pyproject.toml").read_bytes()
    (checkout_dir(prefix) / "pyproject.toml").write_bytes(pyproject)
    return prefix


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.9.1 alone, without its dependencies."""
    return _venv(tmp_path_factory.mktemp("verify") / "env", "verl==0.9.1")


def test_an_older_verl_names_the_backend_modules_skipped(env: Path) -> None:
    [item] = _probe(env / "bin" / "python", ["verl.models.mcore.bridge"], since="0.10.0")
    assert item["skipped"] == "verl 0.9.1 is older than 0.10.0, whose modules these are"


def test_verify_imports_the_megatron_bridge_and_peft_paths(env: Path) -> None:
    spec = load_profile("megatron").verify.model_copy(update={"versions": {}, "gpu_smoke": False})
    checks = {c.name: c for c in verify_env(env, spec).checks}
    bridge = checks["import verl.models.mcore.bridge"]
    assert bridge.status == "fail", bridge  # this env has no torch, let alone Megatron-Bridge
    peft = checks["import megatron.bridge.peft.utils:create_peft"]
    assert peft.status == "fail" and "No module named 'megatron'" in peft.detail


def _pip_check(env: Path, **fields: object) -> str:
    spec = VerifySpec(imports=(), gpu_smoke=False)
    report = verify_env(env, spec, **fields)  # type: ignore[arg-type]
    check = next(c for c in report.checks if c.name == "uv pip check")
    return f"{check.status}: {check.detail}"


def test_pip_check_reports_verls_deps_free_installs_as_expected(tmp_path: Path) -> None:
    """TransferQueue (which verl installs deps-free) and qwen-vl-utils (which it does not), each
    installed without its dependencies."""
    env = _venv(tmp_path / "env", "transferqueue==0.1.10", "qwen-vl-utils==0.0.14")
    free = deps_free(checkout_dir(env))
    assert {"transferqueue", "megatron-bridge", "veomni", "mbridge"} <= set(free)
    assert free["megatron-core"].declared == {"torch", "numpy", "packaging"}
    python = str(env / "bin" / "python")
    uv = find_uv()
    assert uv is not None
    # qwen-vl-utils' own missing dependencies are a real failure, named alone
    said = _pip_check(env)
    assert said.startswith("fail: The package `qwen-vl-utils` requires"), said
    assert "transferqueue" not in said
    subprocess.run([uv, "pip", "uninstall", "-q", "--python", python, "qwen-vl-utils"], check=True)
    said = _pip_check(env)
    assert said.startswith(
        "warn: expected, only installed without their own dependencies: transferqueue (verl's "
        "[[tool.uv.dependency-metadata]]): The package `transferqueue` requires `ray[default]`"
    ), said
    # a profile stage's no_deps install is named the same way
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", python, "--no-deps", "qwen-vl-utils==0.0.14"],
        check=True,
    )
    said = _pip_check(env, no_deps=(("extras", "qwen-vl-utils"),))
    assert said.startswith("warn: expected") and "qwen-vl-utils (stage extras (no_deps))" in said


def test_verify_fails_where_numba_refuses_the_envs_numpy(tmp_path: Path) -> None:
    """numba checks numpy at import, as vLLM's n-gram proposer meets it: numba 0.61.2 (numpy
    <2.3) beside numpy 2.4.6 here, as numba 0.65.0 beside numpy 2.5.5 in the GPU locks."""
    env = _venv(tmp_path / "env", "numba==0.61.2", "llvmlite==0.44.0", "numpy==2.4.6")
    spec = VerifySpec(imports=("verl.workers.rollout.vllm_rollout",), gpu_smoke=False)
    checks = {c.name: c for c in verify_env(env, spec).checks}
    numba = checks["import numba"]
    assert numba.status == "fail" and "Numba needs NumPy 2.2 or less" in numba.detail, numba
    proposer = checks["import vllm.v1.spec_decode.ngram_proposer"]
    assert proposer.status == "fail", proposer  # no vLLM in this env at all
