"""The stand-in kernel for the wheelhouse tests: its sdist on a find-links folder, and envs
installed from the kernel-stage profile through the real CLI."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from scaffold import Run, invoke, run_cli

DATA = Path(__file__).parent / "data"
PROFILE = DATA / "profiles" / "kernel-stage" / "profile.yaml"
STANDIN = DATA / "kernels" / "standin"
BROKEN = DATA / "kernels" / "broken"
CUDA_STANDIN = DATA / "kernels" / "cudastandin"


def make_sdist(
    source: Path, links: Path, name: str = "standin-kernel", version: str = "0.1.0"
) -> Path:
    """{name}-{version}.tar.gz of `source` in `links` (no build backend needed to make it)."""
    links.mkdir(parents=True, exist_ok=True)
    base = f"{name}-{version}"
    archive = links / f"{base}.tar.gz"
    info_text = f"Metadata-Version: 2.2\nName: {name}\nVersion: {version}\n".encode()
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(source.rglob("*")):
            inside = path.relative_to(source)
            if path.is_file() and not {"__pycache__", "build"} & set(inside.parts):
                tar.add(path, f"{base}/{inside}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(info_text)
        tar.addfile(info, io.BytesIO(info_text))
    return archive


def build_broken_wheel(uv: str, python: Path, work: Path) -> Path:
    """The stand-in as a wheel built for another torch: its module needs a missing c10 symbol."""
    source = Path(shutil.copytree(BROKEN, work / "broken-src"))
    out = work / "broken-wheel"
    subprocess.run(
        [uv, "build", "-q", "--wheel", "--python", str(python), "--out-dir", str(out), str(source)],
        check=True,
    )
    return next(out.glob("*.whl"))


def lock_cpu(profile: Path, repo: Path, out: Path) -> None:
    """`lock` the kernel-stage profile `profile` (its cpu variant, Python 3.11, verl from `repo`)
    into `out`; a failure shows what the tool said."""
    argv = ["lock", "--profile", str(profile), "--cuda", "cpu", "--python-version", "3.11"]
    argv += ["--verl-source", str(repo), "--output", str(out)]
    done = invoke(argv)
    assert done.code == 0, done.err


def install_argv(prefix: Path, repo: Path, *extra: str) -> list[str]:
    """The kernel-stage profile into `prefix`, verl from the test repo."""
    return [
        "install",
        "--profile",
        str(PROFILE),
        "--prefix",
        str(prefix),
        "--verl-source",
        str(repo),
        *extra,
    ]


@dataclass(frozen=True)
class Lab:
    """A lab's home (and so its default wheelhouse), the stand-in's find-links folder, the verl
    repo, and the first two envs: env-a built the kernel and published it, env-b took it."""

    root: Path
    repo: Path
    wheelhouse: Path
    first: Run
    second: Run

    @property
    def links(self) -> Path:
        """The find-links folder holding the stand-in's sdist."""
        return self.root / "links"

    def environment(self) -> contextlib.AbstractContextManager[None]:
        """The lab's home and find-links, for the runs of one test module."""
        return lab_environment(self.root)


@contextlib.contextmanager
def lab_environment(root: Path) -> Iterator[None]:
    """VERL_BOOTSTRAP_HOME (so the default wheelhouse) and PIP_FIND_LINKS of the lab at `root`."""
    found = f"{os.environ.get('PIP_FIND_LINKS', '')} {root / 'links'}".strip()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERL_BOOTSTRAP_HOME", str(root / "home"))
        patch.setenv("PIP_FIND_LINKS", found)
        yield


def make_lab(root: Path, repo: Path) -> Lab:
    """Two envs of the kernel-stage profile, one after the other (built once per session)."""
    make_sdist(STANDIN, root / "links")
    with lab_environment(root):
        first = run_cli(install_argv(root / "env-a", repo))
        second = run_cli(install_argv(root / "env-b", repo))
    return Lab(root, repo, root / "home" / "wheelhouse", first, second)


def write_profile(folder: Path, profile: dict[str, Any], recorded: dict[str, Any]) -> Path:
    """`profile` as folder/profile.yaml, with the recorded lists of its sources beside it
    (kernel-wheels/recorded.yaml: source id -> its `from` and `wheels`, recorded 2026-12-04)."""
    folder.mkdir(parents=True)
    path = folder / "profile.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    sources = {k: {"recorded": "2026-12-04", **v} for k, v in recorded.items()}
    (folder / "kernel-wheels").mkdir()
    record = {"schema_version": 1, "sources": sources}
    (folder / "kernel-wheels" / "recorded.yaml").write_text(yaml.safe_dump(record))
    return path
