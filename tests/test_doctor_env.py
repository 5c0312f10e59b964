"""Doctor's env checks against real envs: shadowing, verl's editable checkout, uv pip check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from verlrepo import git, make_verl_repo

from verl_bootstrap.installer.cmdline import find_uv
from verl_bootstrap.plan.doctor import DoctorInputs, Status, run_doctor
from verl_bootstrap.plan.doctor.checks_env import installed_versions, version_matches
from verl_bootstrap.plan.doctor.results import CheckResult
from verl_bootstrap.profile.models import Profile

REAL_SO = Path("/lib/x86_64-linux-gnu/libz.so.1").resolve()


def _check(name: str, **inputs: Any) -> CheckResult:
    fields: dict[str, Any] = {"environ": {"PATH": os.environ.get("PATH", "")}, **inputs}
    return run_doctor(DoctorInputs(**fields), only=[name]).checks[0]


@pytest.fixture(scope="module")
def verl_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real venv with verl installed editable (--no-deps) from a real git checkout."""
    root = tmp_path_factory.mktemp("verl-env")
    checkout = make_verl_repo(root / "verl")
    # The sdist carries verl.egg-info, which the editable build rewrites; a real clone of verl
    # does not track it, so neither does this one.
    git(checkout, "rm", "-r", "-q", "--cached", "verl.egg-info")
    (checkout / ".git" / "info" / "exclude").write_text("verl.egg-info/\n")
    git(checkout, "commit", "-q", "-m", "untrack the sdist's egg-info, as a clone has it")
    prefix = root / "env"
    uv = find_uv()
    assert uv is not None
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(prefix)], check=True)
    install = [uv, "pip", "install", "-q", "--python", str(prefix / "bin" / "python")]
    subprocess.run([*install, "--no-deps", "-e", str(checkout)], check=True, timeout=300)
    return prefix, checkout


def test_foreign_cudnn_on_ld_library_path_is_a_warning(tmp_path: Path) -> None:
    shutil.copy(REAL_SO, tmp_path / "libcudnn.so.9")
    result = _check("shadowing-paths", root=tmp_path, environ={"LD_LIBRARY_PATH": str(tmp_path)})
    assert result.status is Status.WARN
    assert result.data["libraries"] == [
        {"path": str(tmp_path / "libcudnn.so.9"), "origin": "LD_LIBRARY_PATH"}
    ]
    assert result.fix and "off LD_LIBRARY_PATH" in result.fix


def test_clean_paths_pass(tmp_path: Path) -> None:
    result = _check("shadowing-paths", root=tmp_path, environ={})
    assert result.status is Status.OK


def test_a_foreign_cudnn_loaded_into_the_envs_interpreter_fails(tmp_path: Path) -> None:
    cudnn = tmp_path / "libcudnn.so.9"
    shutil.copy(REAL_SO, cudnn)
    env = {**os.environ, "LD_PRELOAD": str(cudnn)}
    result = _check("shadowing-loaded", python=Path(sys.executable), environ=env)
    assert result.status is Status.FAIL
    assert result.fix and "activation" in result.fix
    assert result.data["loaded"] == [
        {"name": "libcudnn.so.9", "path": str(cudnn), "inside_prefix": False}
    ]


def test_without_torch_nothing_is_loaded_and_doctor_says_so() -> None:
    result = _check("shadowing-loaded", python=Path(sys.executable), environ=dict(os.environ))
    if result.data["torch"].get("error"):  # this venv has no torch
        assert result.status is Status.WARN and result.data["loaded"] == []
    else:
        assert result.status is Status.OK


def test_env_checks_skip_when_there_is_no_env(tmp_path: Path) -> None:
    for name in ("shadowing-loaded", "verl-source", "protected-versions", "pip-check"):
        assert _check(name).status is Status.SKIPPED
        result = _check(name, prefix=tmp_path / "absent")
        assert result.status is Status.SKIPPED
        assert result.data == {"prefix": str(tmp_path / "absent")}


def test_verl_editable_at_the_lockfile_commit(verl_env: tuple[Path, Path]) -> None:
    prefix, checkout = verl_env
    commit = git(checkout, "rev-parse", "HEAD")
    result = _check("verl-source", prefix=prefix, lock_commit=commit[:10])
    assert result.status is Status.OK, result.finding
    assert result.data["checkout"] == str(checkout) and result.data["commit"] == commit
    assert result.data["uncommitted"] is False


def test_verl_at_another_commit_fails_with_the_checkout_command(
    verl_env: tuple[Path, Path],
) -> None:
    prefix, checkout = verl_env
    result = _check("verl-source", prefix=prefix, lock_commit="0123456789abcdef")
    assert result.status is Status.FAIL
    assert result.fix == f"git -C {checkout} checkout 0123456789abcdef"


def test_uncommitted_changes_in_verl_warn(verl_env: tuple[Path, Path]) -> None:
    prefix, checkout = verl_env
    (checkout / "setup.py").write_text((checkout / "setup.py").read_text() + "\n# local edit\n")
    try:
        result = _check("verl-source", prefix=prefix)
    finally:
        git(checkout, "checkout", "--", "setup.py")
    assert result.status is Status.WARN and result.data["uncommitted"] is True


def test_verl_missing_or_not_editable_fails(tmp_path: Path, verl_env: tuple[Path, Path]) -> None:
    uv = find_uv()
    assert uv is not None
    prefix = tmp_path / "e"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(prefix)], check=True)
    result = _check("verl-source", prefix=prefix)
    # a plain env (make gpu-check's PyTorch env) has nothing to compare; one the tool built fails
    assert result.status is Status.SKIPPED
    assert result.data == {"verl": None, "built_by_tool": False}
    (prefix / ".verl-bootstrap").mkdir()
    result = _check("verl-source", prefix=prefix)
    assert result.status is Status.FAIL
    assert result.data == {"verl": None, "built_by_tool": True}
    _, checkout = verl_env
    install = [uv, "pip", "install", "-q", "--python", str(prefix / "bin" / "python")]
    subprocess.run([*install, "--no-deps", str(checkout)], check=True, timeout=300)
    result = _check("verl-source", prefix=prefix)
    assert result.status is Status.FAIL
    assert result.data == {"verl": "0.9.1", "editable": False}


def test_protected_versions_read_from_the_envs_metadata(verl_env: tuple[Path, Path]) -> None:
    prefix, _ = verl_env
    assert installed_versions(prefix)["verl"] == "0.9.1"
    good = _check("protected-versions", prefix=prefix, expected_versions={"verl": "0.9.1"})
    assert good.status is Status.OK and good.data["installed"] == {"verl": "0.9.1"}
    bad = _check("protected-versions", prefix=prefix, expected_versions={"verl": "0.9.0"})
    assert bad.status is Status.FAIL
    assert bad.data == {"expected": {"verl": "0.9.0"}, "installed": {"verl": "0.9.1"}}
    profile = Profile.model_validate(
        {
            "schema_version": 1,
            "name": "fsdp",
            "stages": [{"id": "install-verl", "kind": "install-verl"}],
            "protected": ["torch"],
        }
    )
    missing = _check("protected-versions", prefix=prefix, profile=profile)
    assert missing.status is Status.FAIL and missing.data["installed"] == {"torch": None}


def test_version_matching_rules() -> None:
    assert version_matches("2.11.0+cu130", "2.11.0+cu130")
    assert version_matches("2.11.0+cu130", "2.11.0")
    assert not version_matches("2.11.0+cu128", "2.11.0+cu130")
    assert version_matches("9.19.0.56", ">=9.10,<10")
    assert not version_matches("2.10.0", "==2.11.0")


def test_uv_pip_check_finds_verls_missing_requirements(verl_env: tuple[Path, Path]) -> None:
    prefix, _ = verl_env
    result = _check("pip-check", prefix=prefix)
    assert result.status is Status.FAIL
    assert "verl" in result.finding and "not installed" in result.finding
    assert result.fix and "uv pip check --python" in result.fix


def test_uv_pip_check_passes_on_a_clean_env(tmp_path: Path) -> None:
    uv = find_uv()
    assert uv is not None
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(tmp_path / "e")], check=True)
    assert _check("pip-check", prefix=tmp_path / "e").status is Status.OK
