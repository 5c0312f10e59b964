"""The failure classifier over real pytest output: a real pytest run writes the JUnit report.

Each case below is a real error raised for real in a small test module (a missing module, a
name a package lacks, a refused connection, a missing dataset file, an assertion), so that the
classifier sees exactly the text pytest produces, including collection errors. The shapes only a
GPU stack produces (torch's CUDA errors) are added as the lines torch prints.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from verl_bootstrap.verify.verltests.classify import CLASSES, RULES, classify, evidence
from verl_bootstrap.verify.verltests.junit import Case, read_junit

CASES = """
import os, urllib.request


def test_missing_runtime_module():
    import transfer_queue_not_installed  # noqa: F401


def test_gpu_only_module():
    import vllm  # noqa: F401


def test_name_a_package_lacks():
    from packaging import version_that_does_not_exist  # noqa: F401


def test_refused_connection():
    urllib.request.urlopen("http://127.0.0.1:{port}/model.safetensors", timeout=5)


def test_dataset_the_workflow_downloads():
    open(os.path.expanduser("~/models/hf_data/gsm8k/train.parquet"))


def test_plain_assertion():
    device = "cuda" if os.environ.get("NO_SUCH_VARIABLE") else "cpu"  # CUDA in the code line
    assert device == "cuda:0"


def test_passes():
    assert True
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    root = tmp_path_factory.mktemp("shapes")
    (root / "tests").mkdir()
    (root / "tests" / "test_shapes_on_cpu.py").write_text(CASES.format(port=closed_port()))
    (root / "tests" / "test_collect_on_cpu.py").write_text("import vllm.engine\n")
    (root / "tests" / "test_collect_env_on_cpu.py").write_text("import msgspec_absent\n")
    junit = root / "junit.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--continue-on-collection-errors",
            f"--junitxml={junit}",
            "tests",
        ],
        cwd=root,
        capture_output=True,
        check=False,
        timeout=120,
    )
    return {case.nodeid.rsplit("::", 1)[-1]: case for case in read_junit(junit)}


@pytest.mark.parametrize(
    ("name", "outcome", "cls", "rule"),
    [
        ("test_missing_runtime_module", "failed", "env", "missing-module"),
        ("test_gpu_only_module", "failed", "gpu", "gpu-package"),
        ("test_name_a_package_lacks", "failed", "env", "cannot-import-name"),
        ("test_refused_connection", "failed", "download", "network"),
        ("test_dataset_the_workflow_downloads", "failed", "download", "downloaded-files"),
        ("test_plain_assertion", "failed", "other", "none"),
        ("tests/test_collect_on_cpu.py", "error", "gpu", "gpu-package"),
        ("tests/test_collect_env_on_cpu.py", "error", "env", "missing-module"),
    ],
)
def test_real_pytest_failures_are_classified(
    cases: dict[str, Case], name: str, outcome: str, cls: str, rule: str
) -> None:
    case = cases[name]
    assert case.outcome == outcome
    verdict = classify(case.message, case.text)
    assert (verdict.cls, verdict.rule) == (cls, rule), (verdict, case.text[-800:])


def test_a_passing_test_is_read_as_passed(cases: dict[str, Case]) -> None:
    assert cases["test_passes"].outcome == "passed"
    assert len(cases) == 9


def test_the_evidence_is_the_exception_lines_not_the_code(cases: dict[str, Case]) -> None:
    case = cases["test_plain_assertion"]
    assert "cuda" in case.text  # the code line is in the report ...
    lines = evidence(case.message, case.text)
    assert lines[0].startswith("AssertionError: assert 'cpu' == 'cuda:0'"), lines
    assert not any("NO_SUCH_VARIABLE" in line for line in lines), lines  # ... not the evidence


@pytest.mark.parametrize(
    ("line", "cls"),
    [
        # torch's own messages on a host or build without CUDA
        ("AssertionError: Torch not compiled with CUDA enabled", "gpu"),
        ("RuntimeError: Found no NVIDIA driver on your system.", "gpu"),
        ("RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", "gpu"),
        ("RuntimeError: 0 active drivers ([]). There should only be one.", "gpu"),
        # huggingface_hub / transformers offline
        ("OSError: We couldn't connect to 'https://huggingface.co' to load the files", "download"),
        (
            "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in "
            "the disk cache and outgoing traffic has been disabled.",
            "download",
        ),
        ("ImportError: /x/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDevicEi", "env"),
        ("ModuleNotFoundError: No module named 'megatron'", "env"),
        ("ModuleNotFoundError: No module named 'flash_attn.bert_padding'", "gpu"),
        # measured: verl v0.9.0's vllm_rollout tests, collected in a cpu env
        (
            "ValueError: vllm version None not supported and SGLang also not Found. Currently "
            "supported vllm versions are 0.18.0+",
            "gpu",
        ),
        # measured: verl 0.9.1's Ray tests on a host with a load of 12 on 2 cores
        (
            "Exception: The current node timed out during startup. This could happen because some "
            "of the raylet failed to startup or the GCS has become overloaded.",
            "other",
        ),
        # measured: verl v0.8.0's git tests/utils/dataset/test_rl_dataset_on_cpu.py with
        # transformers 5, before verl's CPU workflow downloaded the model to ~/models
        (
            "OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
            "'/root/models/deepseek-ai/deepseek-coder-1.3b-instruct'. Use `repo_type` argument if "
            "needed.",
            "download",
        ),
        (
            "OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': 'a/b/c'.",
            "other",
        ),
    ],
)
def test_the_shapes_only_a_gpu_stack_or_the_hub_produce(line: str, cls: str) -> None:
    assert classify(line, f"    call()\nE   {line}\n").cls == cls


def test_every_rule_names_a_known_class_and_a_reason() -> None:
    assert {r.cls for r in RULES} <= set(CLASSES)
    assert len({r.name for r in RULES}) == len(RULES)
    assert all(r.reason for r in RULES)
