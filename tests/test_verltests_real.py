"""`verl-bootstrap test` for real: verl's own CPU test files, run in the session's cpu env.

The env is the session's real cpu install (verl 0.9.1 from its release sdist); the test files are
verl's own. Three of them, chosen for what they prove: one that passes on CPU, one that
exercises the SGLang rollout's helpers (verl imports them without SGLang), and one that loads a
model config from the hub (offline here, so it must be reported as a download, not hidden).
A test file that imports Megatron as verl's own
tests/utils/ckpt/test_megatron_checkpoint_manager_on_cpu.py does at v0.9.0 (a file the 0.9.1
sdist does not carry; megatron-core comes only with --with-tests), shows that an env problem
fails the command.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
from cpuenv import Installed
from scaffold import run_cli

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED

FILES = (
    "tests/test_base_config_on_cpu.py",
    "tests/checkpoint_engine/test_sglang_fusion_bucketing_on_cpu.py",
    "tests/trainer/ppo/test_rollout_moe_lb_metrics_on_cpu.py",
)


def run_test(argv: list[str]) -> tuple[int, dict[str, Any]]:
    ran = run_cli(["test", *argv])
    return ran.code, ran.body


@pytest.fixture(scope="module")
def report(cpu_env_session: Installed) -> tuple[int, dict[str, Any]]:
    assert cpu_env_session.first.code == EXIT_OK, cpu_env_session.first.stderr
    files = [arg for path in FILES for arg in ("--file", path)]
    return run_test(["--prefix", str(cpu_env_session.prefix), *files])


def test_verls_own_cpu_tests_run_in_the_env(report: tuple[int, dict[str, Any]]) -> None:
    code, body = report
    assert body["schema"] == "verl-bootstrap.test/1"
    assert body["files"] == sorted(FILES)
    assert body["counts"]["passed"] > 0, body
    assert body["by_class"]["env"] == 0, body["failures"]
    assert body["ok"] is True
    assert code == EXIT_OK
    assert Path(body["log"]).is_file()


def test_each_failure_is_classified_with_the_line_that_decided_it(
    report: tuple[int, dict[str, Any]],
) -> None:
    _, body = report
    failed = body["counts"]["failed"] + body["counts"]["error"]
    assert len(body["failures"]) == failed
    assert sum(body["by_class"].values()) == failed
    for failure in body["failures"]:
        assert failure["cls"] in ("download", "gpu", "other"), failure
        assert failure["line"], failure


def test_a_module_the_env_lacks_fails_the_command(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    checkout = tmp_path / "verl"
    needs_megatron = checkout / "tests" / "utils" / "ckpt" / "test_mcore_import_on_cpu.py"
    needs_megatron.parent.mkdir(parents=True)
    # line 31 of verl v0.9.0's tests/utils/ckpt/test_megatron_checkpoint_manager_on_cpu.py
    needs_megatron.write_text(
        "from megatron.core import parallel_state as mpu\n\n\ndef test_x():\n    pass\n"
    )
    code, body = run_test(["--prefix", str(cpu_env_session.prefix), "--checkout", str(checkout)])
    assert code == EXIT_STEP_FAILED
    assert body["ok"] is False
    (failure,) = body["failures"]
    assert (failure["cls"], failure["rule"], failure["outcome"]) == (
        "env",
        "missing-module",
        "error",
    )
    assert "No module named 'megatron'" in failure["line"]


def test_an_env_without_pytest_is_told_how_to_add_it(tmp_path: Path) -> None:
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    prefix = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    checkout = tmp_path / "verl"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_a_on_cpu.py").write_text("def test_a():\n    pass\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["test", "--prefix", str(prefix), "--checkout", str(checkout)])
    assert code == EXIT_STEP_FAILED
    assert "has no pytest" in err.getvalue()
    assert "--with-tests" in err.getvalue()


def test_collect_only_imports_the_files_without_running_them(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    checkout = tmp_path / "verl"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_runs_on_cpu.py").write_text(
        "def test_a():\n    raise AssertionError('ran')\n\n\ndef test_b():\n    pass\n"
    )
    (checkout / "tests" / "test_engine_on_cpu.py").write_text("import vllm\n")
    code, body = run_test(
        ["--prefix", str(cpu_env_session.prefix), "--checkout", str(checkout), "--collect-only"]
    )
    assert body["counts"] == {"collected": 2, "error": 1, "timeout": 0}  # test_a never ran
    (failure,) = body["failures"]
    assert (failure["cls"], failure["nodeid"]) == ("gpu", "tests/test_engine_on_cpu.py")
    assert code == EXIT_OK


def test_the_tests_run_with_the_env_first_on_path(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    # verl's tests/utils/test_config_on_cpu.py runs `python3 scripts/print_cfg.py` (needs hydra)
    checkout = tmp_path / "verl"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_python3_on_cpu.py").write_text(
        "import os, subprocess, sys\n\n\ndef test_python3_is_the_envs():\n"
        "    out = subprocess.check_output(['python3', '-c', 'import sys; print(sys.prefix)'])\n"
        "    assert os.path.realpath(out.decode().strip()) == os.path.realpath(sys.prefix)\n"
    )
    code, body = run_test(["--prefix", str(cpu_env_session.prefix), "--checkout", str(checkout)])
    assert body["counts"]["passed"] == 1, body["failures"]
    assert code == EXIT_OK


def test_a_checkout_inside_another_project_runs_with_its_own_settings(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    # Found by the heavy tier: an env under this project's build/ ran verl's tests with this
    # project's `filterwarnings = error`, and verl's own warning "torchtitan engine is not
    # available" (verl/workers/engine/__init__.py) became an import error of class env.
    import shutil  # noqa: PLC0415

    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "pyproject.toml").write_text('[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    (lab / "conftest.py").write_text("raise RuntimeError('a conftest above the checkout ran')\n")
    checkout = lab / "verl"
    shutil.copytree(
        cpu_env_session.prefix / "src" / "verl",
        checkout,
        ignore=shutil.ignore_patterns(".git", "__pycache__"),
    )
    warns = "tests/checkpoint_engine/test_fsdp_lora_only_checkpoint_on_cpu.py"
    code, body = run_test(
        [
            "--prefix",
            str(cpu_env_session.prefix),
            "--checkout",
            str(checkout),
            "--file",
            warns,
            "--collect-only",
        ]
    )
    assert body["failures"] == [], body["failures"]
    assert body["counts"]["collected"] > 0, body
    assert code == EXIT_OK
