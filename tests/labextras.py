"""What a lab's mirror holds besides the cached wheel folder: a lockfile's exact artifacts (with
their upload times), and small wheels made on the spot."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from labmirror import mirror_wheels, project_of, sha256_file
from verlrepo import CACHE, filling, verl_sdist

__all__ = ["lock_extras", "make_wheel"]


def lock_extras(lockfile: Path) -> Path:
    """The files of `lockfile` that `mirror_wheels()` lacks, with their upload times (once).

    uv lists, for the lock's platform and cutoff, every artifact of each pinned version with its
    URL, sha256 and upload time (a pylock.toml); the locked ones the mirror lacks are downloaded.
    The upload times go to upload-times.json, which the mirror host serves (PEP 700), so that the
    lock's `--exclude-newer` cutoff sees the mirror as it saw PyPI.
    """
    import yaml  # noqa: PLC0415

    lock = yaml.safe_load(lockfile.read_text())
    target = CACHE / f"lab-lock-extras-{hashlib.sha256(lockfile.read_bytes()).hexdigest()[:12]}"
    with filling(target.name):
        if not (target / ".complete").exists():
            _fill_extras(lock, target)
    return target


def _fill_extras(lock: dict[str, Any], target: Path) -> None:
    import tomllib  # noqa: PLC0415

    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    packages = [
        pkg
        for served in _pylocks(lock, target)
        for pkg in tomllib.loads(served.read_text()).get("packages", [])
    ]
    artifacts = [a for pkg in packages for a in [*pkg.get("wheels", []), pkg.get("sdist")] if a]
    times = {a["url"].rsplit("/", 1)[-1]: a["upload-time"] for a in artifacts}
    wanted = {h for d in _locked_dists(lock) for h in d.get("hashes", ())}
    have = {sha256_file(f) for f in mirror_wheels().iterdir() if not f.name.startswith(".")}
    urls = [a["url"] for a in artifacts if a["hashes"]["sha256"] in wanted - have]
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest", str(target)]
    for batch in _one_per_project(urls):  # pip takes one file per project per call
        subprocess.run([*pip, *batch], check=True)
    verl = lock.get("verl") or {}
    if verl.get("sdist_sha256") == sha256_file(verl_sdist()):  # the lock names the release sdist
        shutil.copy2(verl_sdist(), target / verl_sdist().name)
    (target / "upload-times.json").write_text(json.dumps(times, default=str, indent=1))
    (target / ".complete").write_text("ok\n")


def _locked_dists(lock: dict[str, Any]) -> list[dict[str, Any]]:
    """Every distribution the lock installs, and each stage's locked build env (no index named:
    the default one)."""
    return [
        d for stage in lock["stages"] for d in [*stage["distributions"], *stage.get("build", ())]
    ]


def _one_per_project(urls: list[str]) -> list[list[str]]:
    batches: list[list[str]] = []
    for url in urls:
        project = project_of(url.rsplit("/", 1)[-1])
        free = [b for b in batches if project not in {project_of(u.rsplit("/", 1)[-1]) for u in b}]
        batch = free[0] if free else []
        if not free:
            batches.append(batch)
        batch.append(url)
    return batches


def _pylocks(lock: dict[str, Any], target: Path) -> list[Path]:
    """uv's view of PyPI for the lock's pins: every artifact with its hash and upload time.

    The installed distributions are one set of pins, each stage's build env another (a build
    env may pin another version of a package the env also installs)."""
    groups = [_pins(lock["stages"], "distributions")]
    verl = lock["verl"]
    if isinstance(verl, dict) and verl.get("kind") == "sdist":
        groups[0].append(f"verl=={str(verl['ref']).lstrip('v')}")
    for stage in lock["stages"]:
        build = _pins([stage], "build")
        if build and build not in groups:
            groups.append(build)
    return [_compile(lock, pins, target / f"pylock.pypi-{n}.toml") for n, pins in enumerate(groups)]


def _pins(stages: list[dict[str, Any]], key: str) -> list[str]:
    return sorted(
        {
            f"{d['name']}=={d['version']}"
            for stage in stages
            for d in stage.get(key, ())
            if d.get("source") in ("wheel", "sdist") and d.get("index", "default") == "default"
        }
    )


def _compile(lock: dict[str, Any], pins: list[str], out: Path) -> Path:
    from verl_bootstrap.installer.cmdline import uv_binary  # noqa: PLC0415

    listed = out.with_suffix(".in")
    listed.write_text("\n".join(pins) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "compile",
            str(listed),
            "--no-deps",
            "--no-header",
            "--quiet",
            "--format",
            "pylock.toml",
            "-o",
            str(out),
            "--python-platform",
            "x86_64-manylinux_2_28",
            "--python-version",
            str(lock["python"]),
            "--exclude-newer",
            str(lock["exclude_newer"]),
            "--no-sources",
        ],  # uv's own default index
        check=True,
        env=env,
    )
    return out


def make_wheel(dest: Path, name: str = "tinyextra", version: str = "0.1") -> Path:
    """A real, minimal pure-Python wheel (what a stray `pip install` on one node adds)."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text)}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel
