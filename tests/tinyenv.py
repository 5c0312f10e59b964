"""The cheapest real env: a stand-in verl (a real git repo whose package is named verl and has no
dependencies) and one stage of a tiny package served from a local find-links folder, where the
test can publish a newer version. Built for real by the CLI in ~15 s."""

from __future__ import annotations

import _json
import base64
import hashlib
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from verlrepo import git

HOST_XY = "{}.{}".format(*sys.version_info[:2])

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "verl"
version = "0.9.1"

[tool.setuptools.packages.find]
include = ["verl*"]
"""
PROFILE = """schema_version: 1
name: tiny
python: {{requires: ">=3.10,<3.14", prefer: "{python}"}}
env: {{backend: venv}}
cuda_variants:
  cpu: {{description: no CUDA}}
stages:
  - id: tiny
    packages: ["vbtiny"]
verify: {{imports: [vbtiny], gpu_smoke: false, bf16: false}}
disk_gb: 0.1  # measured: under 1 MB of its own (uv links the files from its cache)
"""


@dataclass(frozen=True)
class TinyParts:
    """What a tiny env is made from: the find-links folder, verl's repo, the profile file."""

    links: Path
    repo: Path
    profile: Path


def tiny_parts(root: Path, patch: pytest.MonkeyPatch) -> TinyParts:
    """The parts under `root`, vbtiny 1.0 published, and pip's find-links pointed there (as a lab
    sets it), for this Python."""
    links = root / "links"
    publish_wheel(links, "vbtiny", "1.0")
    patch.setenv("PIP_FIND_LINKS", str(links))
    return TinyParts(links, standin_verl(root / "verl"), tiny_profile(root / "tiny.yaml", HOST_XY))


def standin_verl(dest: Path, extras: str = "") -> Path:
    """A git repo tagged v0.9.1 holding a dependency-free package named verl; `extras` is a
    `[project.optional-dependencies]` table's body (TOML), for a stand-in with extras."""
    (dest / "verl" / "version").mkdir(parents=True)
    table = f"\n[project.optional-dependencies]\n{extras}" if extras else ""
    (dest / "pyproject.toml").write_text(PYPROJECT + table, encoding="utf-8")
    (dest / "verl" / "__init__.py").write_text('__version__ = "0.9.1"\n', encoding="utf-8")
    (dest / "verl" / "version" / "version").write_text("0.9.1\n", encoding="utf-8")
    (dest / ".gitignore").write_text("build/\n*.egg-info/\n__pycache__/\n", encoding="utf-8")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "stand-in verl 0.9.1")
    git(dest, "tag", "v0.9.1")
    return dest


def tiny_profile(dest: Path, python: str) -> Path:
    """The profile of one `vbtiny` stage, for Python `python` (X.Y)."""
    dest.write_text(PROFILE.format(python=python), encoding="utf-8")
    return dest


def publish_wheel(links: Path, name: str, version: str) -> Path:
    """A pure-Python wheel `name==version` (one module) in the find-links folder `links`."""
    dist = f"{name}-{version}"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    rows = [f"{path},sha256={_digest(text)},{len(text.encode())}" for path, text in files.items()]
    files[f"{dist}.dist-info/RECORD"] = "\n".join([*rows, f"{dist}.dist-info/RECORD,,"]) + "\n"
    links.mkdir(parents=True, exist_ok=True)
    wheel = links / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def kernel_wheel(
    folder: Path, name: str, version: str, python: str = "cp312", platform: str = "linux_x86_64"
) -> Path:
    """A wheel as a kernel's is made: tagged for one Python and platform, holding a compiled
    extension module (the bytes of a real ELF extension of this host's Python, under the name
    the tags' Python gives it). Not loadable for another Python: for the wheelhouse's checks."""
    dist = f"{name}-{version}"
    module = f"{name}/_C.cpython-{python.removeprefix('cp')}-x86_64-linux-gnu.so"
    files: dict[str, str | bytes] = {
        f"{name}/__init__.py": "",
        module: Path(_json.__file__).read_bytes(),
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\n"
        f"Root-Is-Purelib: false\nTag: {python}-{python}-{platform}\n",
    }
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-{python}-{python}-{platform}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, body in files.items():
            archive.writestr(path, body)
    return wheel


def _digest(text: str) -> str:
    raw = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
