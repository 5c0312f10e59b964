"""Exports for real: each one is accepted by the tool it is for.

conda-lock.yml: conda-lock's own model and JSON schema accept it and `conda-lock render` turns it
into an explicit file; pylock.toml: `uv pip sync` installs it; requirements: pip installs a stage
with `--require-hashes --no-deps`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lockfixtures import conda_lock_tool
from scaffold import run_tool
from uv import find_uv_bin

from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.lock.io import read_lockfile

UV = str(find_uv_bin())


def _venv(path: Path, *, seed: bool = False) -> Path:
    args = [UV, "venv", "-q", "--python", sys.executable, str(path)]
    subprocess.run([*args, "--seed"] if seed else args, check=True)
    return path / "bin" / "python"


def test_pylock_export_is_installed_by_uv_pip_sync(cpu_lock: Path, tmp_path: Path) -> None:
    out = tmp_path / "pylock.toml"
    done = run_tool(
        "export", "--format", "pylock", "--lockfile", str(cpu_lock), "--output", str(out)
    )
    assert done.returncode == 0, done.stderr
    python = _venv(tmp_path / "env")
    sync = subprocess.run(
        [UV, "pip", "sync", "--python", str(python), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert sync.returncode == 0, sync.stderr
    lock = read_lockfile(cpu_lock)
    want = {n: d.version for n, d in lock.distributions().items() if n != "verl"}
    got = {n: d.version for n, d in installed(tmp_path / "env").items()}
    assert got == want


def test_requirements_export_is_installed_by_pip_with_require_hashes(
    cpu_lock: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "requirements"
    args = (
        "export",
        "--format",
        "requirements",
        "--lockfile",
        str(cpu_lock),
        "--output",
        str(folder),
    )
    done = run_tool(*args)
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["01-torch.txt", "02-verl-deps.txt"]
    python = _venv(tmp_path / "env", seed=True)
    pip = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "--require-hashes",
            "--no-deps",
            "-r",
            str(folder / "01-torch.txt"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr
    torch = read_lockfile(cpu_lock).distributions()["torch"]
    assert installed(tmp_path / "env")["torch"].version == torch.version


@pytest.mark.parametrize("which", ["cpu_lock", "conda_lock"])
def test_conda_lock_export_is_valid_and_rendered_by_conda_lock(
    which: str, request: pytest.FixtureRequest, python_channel: Path, tmp_path: Path
) -> None:
    lock_path: Path = request.getfixturevalue(which)
    out = tmp_path / "conda-lock.yml"
    args = ["export", "--format", "conda-lock", "--lockfile", str(lock_path), "--output", str(out)]
    done = run_tool(*args, "--channel", str(python_channel))
    assert done.returncode == 0, done.stderr
    tool = conda_lock_tool()
    check = subprocess.run(
        [str(tool / "bin" / "python"), "-c", _VALIDATE, str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,  # not the repo: its `installer` would shadow conda-lock's
    )
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["packages"] == len(read_lockfile(lock_path).conda) + sum(
        1 for d in read_lockfile(lock_path).distributions().values() if d.hashes
    )
    render = subprocess.run(
        [
            str(tool / "bin" / "conda-lock"),
            "render",
            "--kind",
            "explicit",
            "-p",
            "linux-64",
            "--filename-template",
            str(tmp_path / "explicit-{platform}.lock"),
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert render.returncode == 0, render.stderr
    explicit = (tmp_path / "explicit-linux-64.lock").read_text(encoding="utf-8")
    assert "@EXPLICIT" in explicit and "# pip torch @ " in explicit
    for package in read_lockfile(lock_path).conda:
        assert f"/linux-64/{package.filename}#{package.md5}" in explicit


# Run inside conda-lock's venv: its pydantic model and its JSON schema both accept the file.
_VALIDATE = """
import json, sys
from importlib.resources import files
import fastjsonschema, yaml
from conda_lock.lockfile.v1.models import Lockfile
data = yaml.safe_load(open(sys.argv[1]))
path = files("conda_lock.lockfile.v1").joinpath("conda-lock-v1.schema.json")
schema = json.loads(path.read_text())
fastjsonschema.compile(schema)(data)
lock = Lockfile.model_validate(data)
print(json.dumps({"packages": len(lock.package)}))
"""
