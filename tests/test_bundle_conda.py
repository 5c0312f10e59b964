"""Bundles of a lock with a conda part, for real: a small profile (a conda python and a noarch
package from the repo's local channel, one wheel, and verl) is locked against the channel and
bundled; the channel is then deleted and the env installed from the bundle with no network,
through py-rattler, and verified against the lock. A conda member changed in the bundle is
refused before anything is linked, and so is one that matches its manifest but not the lock.

verl here is a one-module stand-in (a local git repo tagged v0.9.1 whose package declares no
requirements): real verl's runtime is 1.5 GB, which `uv pip check` would want installed, and the
cpu bundle test (test_bundle.py) installs real verl from a bundle already.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from bundlefixtures import bundle_tool, flip_byte, manifest_of, no_network, tool_env
from condafixture import MARKER_PACKAGE, PYTHON_BUILD, PYTHON_VERSION
from lockfixtures import HOST_XY, TOMORROW
from verlrepo import git

from verl_bootstrap.errors import EXIT_REFUSED
from verl_bootstrap.lock.io import read_lockfile

PROFILE = """\
schema_version: 1
name: tiny-conda
description: a conda python, one wheel and verl, for the bundle tests
verl:
  repo: https://github.com/verl-project/verl.git
  ref: v0.9.1
python:
  requires: ">={xy},<{next_xy}"
env:
  backend: conda
  channels: [{channel}]
  conda_packages: [{marker}]
cuda_variants:
  cpu:
    description: no CUDA
stages:
  - id: tools
    packages: ["six==1.17.0"]
verify:
  imports: [six]
  gpu_smoke: false
disk_gb: 0.1  # measured: 53 MB (the conda python and its stdlib, six, the stand-in verl)
"""


def _stand_in_verl(dest: Path) -> Path:
    """A git repo at tag v0.9.1 holding a package named verl with no requirements."""
    (dest / "verl").mkdir(parents=True)
    (dest / "verl" / "__init__.py").write_text('__version__ = "0.9.1"\n', encoding="utf-8")
    (dest / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "verl"\nversion = "0.9.1"\n[tool.setuptools]\npackages = ["verl"]\n',
        encoding="utf-8",
    )
    for args in (
        ("init", "-q", "-b", "main"),
        ("add", "-A"),
        ("commit", "-q", "-m", "stand-in"),
        ("tag", "v0.9.1"),
    ):
        git(dest, *args)
    return dest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> dict[str, Path]:
    """The profile, its lock, its bundle (without the tool's wheels) and a cache of its own;
    the channel it was locked from is gone once the bundle is made."""
    base = tmp_path_factory.mktemp("tiny-conda")
    channel = shutil.copytree(python_channel, base / "tiny-channel")
    verl = _stand_in_verl(base / "verl")
    major, minor = HOST_XY.split(".")
    profile = base / "tiny-conda.yaml"
    profile.write_text(
        PROFILE.format(
            xy=HOST_XY, next_xy=f"{major}.{int(minor) + 1}", channel=channel, marker=MARKER_PACKAGE
        ),
        encoding="utf-8",
    )
    lock, bundle, cache = base / "tiny.lock.yaml", base / "tiny.tar", base / "cache"
    env = tool_env(VERL_BOOTSTRAP_CACHE=str(cache))
    done = bundle_tool(
        "lock",
        "--profile",
        str(profile),
        "--cuda",
        "cpu",
        "--python-version",
        HOST_XY,
        "--exclude-newer",
        str(TOMORROW),
        "--verl-source",
        str(verl),
        "--channel",
        str(channel),
        "--output",
        str(lock),
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    done = bundle_tool(
        "bundle",
        "--lockfile",
        str(lock),
        "--no-tool",
        "--channel",
        str(channel),
        "-o",
        str(bundle),
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(channel)
    return {"profile": profile, "lock": lock, "bundle": bundle, "cache": cache}


def _install(tiny: dict[str, Path], bundle: Path, prefix: Path) -> tuple[int, str]:
    env = tool_env(VERL_BOOTSTRAP_CACHE=str(tiny["cache"]))
    done = bundle_tool(
        "--bundle",
        str(bundle),
        "--profile",
        str(tiny["profile"]),
        "--prefix",
        str(prefix),
        env=env,
        prefix=no_network(),
    )
    return done.returncode, done.stdout + done.stderr


def test_the_bundle_holds_the_locked_conda_packages_as_a_channel(tiny: dict[str, Path]) -> None:
    lock = read_lockfile(tiny["lock"])
    conda = {m["path"]: m for m in manifest_of(tiny["bundle"])["members"] if m["role"] == "conda"}
    assert {p.name for p in lock.conda} == {"python", MARKER_PACKAGE}
    for package in lock.conda:
        member = conda.pop(f"conda/{package.subdir}/{package.filename}")
        assert member["sha256"] == package.sha256 and member["name"] == package.name
    assert not conda


def test_a_conda_lock_installs_from_the_bundle_with_no_network_and_ends_verified(
    tiny: dict[str, Path], tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    code, output = _install(tiny, tiny["bundle"], prefix)
    assert code == 0, output[-4000:]
    assert "every sha256 matches its manifest" in output and "✓ verify" in output
    assert (prefix / "conda-meta" / f"python-{PYTHON_VERSION}-{PYTHON_BUILD}.json").is_file()
    assert (prefix / "share" / MARKER_PACKAGE / "README").is_file()
    done = bundle_tool("verify", "--prefix", str(prefix), "--against", str(tiny["lock"]))
    assert done.returncode == 0 and "the env matches" in done.stdout, done.stdout + done.stderr


def test_a_tampered_conda_member_is_refused_before_anything_is_linked(
    tiny: dict[str, Path], tmp_path: Path
) -> None:
    member = f"conda/linux-64/python-{PYTHON_VERSION}-{PYTHON_BUILD}.conda"
    bad = flip_byte(tiny["bundle"], tmp_path / "bad.tar", member)
    prefix = tmp_path / "env"
    code, output = _install(tiny, bad, prefix)
    assert code == EXIT_REFUSED, output[-4000:]
    assert member in output and "nothing was installed" in output
    assert not prefix.exists()


def test_a_conda_member_that_is_not_the_locked_one_is_refused_though_its_manifest_agrees(
    tiny: dict[str, Path], tmp_path: Path
) -> None:
    """A bundle re-packed with another file under the package's name and a manifest rewritten
    to match: the manifest check passes, the lock's hash does not."""
    member = f"conda/noarch/{MARKER_PACKAGE}-1.0-0.conda"
    other = _repacked(tiny["bundle"], tmp_path / "other.tar", member, b"not the locked package")
    prefix = tmp_path / "env"
    code, output = _install(tiny, other, prefix)
    assert code == EXIT_REFUSED, output[-4000:]
    assert "not the locked ones" in output and f"{MARKER_PACKAGE}-1.0-0.conda" in output
    assert not prefix.exists()


def _repacked(bundle: Path, dest: Path, member: str, body: bytes) -> Path:
    manifest = manifest_of(bundle)
    for entry in manifest["members"]:
        if entry["path"] == member:
            entry.update(sha256=hashlib.sha256(body).hexdigest(), size=len(body))
    with tarfile.open(bundle) as tar, tarfile.open(dest, "w") as out:
        for info in tar.getmembers():
            data = tar.extractfile(info).read()  # type: ignore[union-attr]
            if info.name == "manifest.json":
                data = json.dumps(manifest).encode()
            elif info.name == member:
                data = body
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
    return dest
