"""verify on a host with no NVIDIA driver (an env prepared here for a GPU host with --cuda):
an import that fails only for want of the driver is "skipped: needs the NVIDIA driver", while
any other import failure still fails. Real envs and real imports; this host has no driver, so
opening libcuda fails here for real."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.verify.env import verify_env

MODULES = {
    # an AttributeError about triton while no stand-in is loaded is the env's fault (imported
    # first: the stand-in, once loaded, is there for the rest of the process, as with vLLM)
    "breaks_on_its_own": (
        "raise AttributeError(\"module 'triton.language' has no attribute 'exp'\")\n"
    ),
    # what a CUDA extension does when it loads: open the driver's library
    "opens_libcuda": "import ctypes\nctypes.CDLL('libcuda.so.1')\n",
    # vLLM's behaviour with no active driver: vllm.triton_utils hands out a stand-in for
    # triton.language (a module named so, of class TritonLanguagePlaceholder), and code that uses
    # it at import time fails; the stand-in vllm package below has that module's shape
    "uses_stubbed_triton": "from vllm.triton_utils import tl\nexp = tl.exp\n",
    # a broken env: a dependency is missing
    "misses_a_dependency": "import zmq_is_not_installed_here\n",
}


# vllm/triton_utils as vLLM ships it when Triton has no active driver (HAS_TRITON false)
TRITON_UTILS = """import types
HAS_TRITON = False
class TritonLanguagePlaceholder(types.ModuleType):
    def __init__(self):
        super().__init__("triton.language")
        self.constexpr = None
tl = TritonLanguagePlaceholder()
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = tmp_path_factory.mktemp("nodriver") / "env"
    subprocess.run([uv_binary(), "venv", "-q", str(prefix)], check=True)
    (site,) = prefix.glob("lib/python3*/site-packages")
    for name, body in MODULES.items():
        (site / f"{name}.py").write_text(body, encoding="utf-8")
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("", encoding="utf-8")
    (site / "vllm" / "triton_utils.py").write_text(TRITON_UTILS, encoding="utf-8")
    return prefix


def _statuses(env: Path, *, gpu_present: bool) -> dict[str, tuple[str, str]]:
    spec = VerifySpec(imports=tuple(MODULES), gpu_smoke=False)
    report = verify_env(env, spec, gpu_present=gpu_present)
    return {
        c.name.removeprefix("import "): (c.status, c.detail)
        for c in report.checks
        if c.name.startswith("import ")
    }


def test_without_a_driver_only_driver_failures_are_skipped(env: Path) -> None:
    found = _statuses(env, gpu_present=False)
    assert found["opens_libcuda"][0] == "skipped"
    assert found["opens_libcuda"][1].startswith("skipped: needs the NVIDIA driver (OSError: ")
    assert "libcuda.so.1" in found["opens_libcuda"][1]
    assert found["uses_stubbed_triton"] == (
        "skipped",
        "skipped: needs the NVIDIA driver "
        "(AttributeError: module 'triton.language' has no attribute 'exp')",
    )
    assert found["misses_a_dependency"][0] == "fail"
    assert "zmq_is_not_installed_here" in found["misses_a_dependency"][1]
    assert found["breaks_on_its_own"][0] == "fail"


def test_with_a_driver_the_same_failures_fail(env: Path) -> None:
    found = _statuses(env, gpu_present=True)
    assert {name: status for name, (status, _) in found.items()} == dict.fromkeys(MODULES, "fail")


def test_an_env_whose_only_failures_need_the_driver_verifies(env: Path) -> None:
    spec = VerifySpec(imports=("opens_libcuda", "uses_stubbed_triton", "json"), gpu_smoke=False)
    report = verify_env(env, spec)
    assert report.ok, report.failures()
    assert [c.status for c in report.checks if c.name.startswith("import ")] == [
        "skipped",
        "skipped",
        "ok",
    ]
