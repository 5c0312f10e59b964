"""The tool packs itself however it was installed: from a real, non-editable `pip install` into a
fresh venv (no source tree beside it), `export --format apptainer` and `bundle` carry a wheel
packed from the installed files, with the same files and bytes as the wheel built from source.
An index-sourced export writes into the user's folder without taking anything of theirs there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from bundlefixtures import bundle_tool, manifest_of, tool_env
from scaffold import REPO

CPU_LOCK = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", "bench")


@dataclass(frozen=True)
class Installed:
    """The bin folder of a venv with the tool pip-installed, and the wheel `uv build` made from
    the very source it was installed from (to compare with)."""

    bin: Path
    built: Path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv with verl-bootstrap `pip install`ed (not editable) from a clean copy of the
    source (so nothing is written into the checkout, and no stale build/ folder is packed)."""
    base = tmp_path_factory.mktemp("pip-install")
    source = base / "source"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE)
    uv = Path(sys.executable).parent / "uv"
    subprocess.run(
        [str(uv), "build", "--wheel", "-q", "--out-dir", str(base / "built"), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = (base / "built").glob("verl_bootstrap-*.whl")
    shutil.rmtree(source / "build", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True)
    pip = [str(base / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", str(source)]
    done = subprocess.run(pip, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    shutil.rmtree(source)  # the installed tool has no source tree to fall back on
    return Installed(base / "venv" / "bin", built)


def _installed_run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "verl-bootstrap"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=tool_env(),
        check=False,
        timeout=1200,
    )


def _same_as_built(packed: zipfile.ZipFile, built: zipfile.ZipFile) -> None:
    record = next(n for n in built.namelist() if n.endswith(".dist-info/RECORD"))
    assert set(packed.namelist()) == set(built.namelist())
    assert [n for n in built.namelist() if packed.read(n) != built.read(n)] == [record]
    assert any(
        n.endswith(".data/data/share/verl-bootstrap/profiles/cpu.yaml") for n in packed.namelist()
    )


def test_export_apptainer_works_from_a_pip_install(installed: Installed, tmp_path: Path) -> None:
    out = tmp_path / "context"
    out.mkdir()
    definition = out / "verl.def"
    done = _installed_run(
        installed.bin,
        "export",
        "--format",
        "apptainer",
        "--lockfile",
        str(CPU_LOCK),
        "--output",
        str(definition),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("verl_bootstrap-*-py3-none-any.whl")
    assert wheel.name in definition.read_text(encoding="utf-8")
    _same_as_built(zipfile.ZipFile(wheel), zipfile.ZipFile(installed.built))


def test_bundle_works_from_a_pip_install(
    installed: Installed, tmp_path: Path, cpu_lock: Path, verl_repo_session: Path
) -> None:
    bundle = tmp_path / "b.tar"
    done = _installed_run(
        installed.bin,
        "bundle",
        "--lockfile",
        str(cpu_lock),
        "-o",
        str(bundle),
        "--verl-source",
        str(verl_repo_session),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (own,) = (
        m["path"]
        for m in manifest_of(bundle)["members"]
        if m["role"] == "tool" and m["path"].startswith("tool/verl_bootstrap-")
    )
    with tarfile.open(bundle) as tar:
        handle = tar.extractfile(own)
        assert handle is not None
        (tmp_path / "own.whl").write_bytes(handle.read())
    _same_as_built(zipfile.ZipFile(tmp_path / "own.whl"), zipfile.ZipFile(installed.built))


def test_an_index_export_keeps_what_the_output_folder_held(tmp_path: Path) -> None:
    out = tmp_path / "context"
    out.mkdir()
    (out / "build.log").write_text("my build\n", encoding="utf-8")
    target = tmp_path / "elsewhere.yaml"
    target.write_text("mine\n", encoding="utf-8")
    (out / "verl-bootstrap.lock.yaml").symlink_to(target)
    done = bundle_tool(
        "export",
        "--format",
        "dockerfile",
        "--lockfile",
        str(CPU_LOCK),
        "--output",
        str(out / "Dockerfile"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (out / "build.log").read_text(encoding="utf-8") == "my build\n"
    assert target.read_text(encoding="utf-8") == "mine\n"  # the link was replaced, not followed
    copied = out / "verl-bootstrap.lock.yaml"
    assert not copied.is_symlink() and copied.read_bytes() == CPU_LOCK.read_bytes()
    assert not (out / ".gitignore").exists()
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "Dockerfile",
            "build.log",
            "verl-bootstrap.lock.yaml",
            next(p.name for p in out.glob("verl_bootstrap-*.whl")),
        ]
    )
