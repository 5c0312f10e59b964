"""Prebuilt kernel wheels in offline bundles, for real on loopback: a lock made with the network
records the stand-in kernel's wheel (a community release asset, laid out as the real one is, on
a loopback server); `bundle` carries that very file under kernels/ (the manifest lists it with
its sha256) and refuses a server file that changed since the lock, writing no bundle; with the
server stopped, an install from the bundle plans the wheel from the bundle and its kernel stage
installs it with no download and no compiler; a kernel member the lockfile does not record is
refused before anything is installed; a record with no URL is bundled from the lab wheelhouse.

The stand-in's sdist here declares setuptools alone as its build requirement (the lab's also
declares torch, whose latest CUDA build a bundle would carry for an isolated build: gigabytes),
so each bundle is the CPU torch and little else.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from bundlefixtures import BUNDLE_CACHE, manifest_of
from kernellab import STANDIN, Lab, lock_cpu, make_sdist
from loopback import Server, base_url, serve
from scaffold import Run, run_cli
from test_kernels_prebuilt import COMMUNITY, COMMUNITY_NAME, kernel_wheel, lab_profile, relabel

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED
from verl_bootstrap.kernels.wheelhouse import Wheelhouse
from verl_bootstrap.lock.bundle.bundlekernels import collect_kernel_wheels
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import env_lockfile, file_sha256

NAME = COMMUNITY_NAME.format(cuda="cpu", torch="2.13")
COMPILED = "standin.cpp -o"  # the compiler line of the stand-in's one unit


@pytest.fixture(scope="module")
def release(
    kernel_lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Server]]:
    """The community's release asset for the lab's torch on a loopback server (the folder, whose
    `base` file holds its URL, and the server), and the stand-in's light sdist on find-links."""
    root = tmp_path_factory.mktemp("release")
    wheel = next(kernel_lab.wheelhouse.glob("*.whl"))
    relabel(wheel, root / COMMUNITY / "v0.9.4" / NAME, "cputorch2.13")
    source = Path(shutil.copytree(STANDIN, root / "standin-src"))
    pyproject = source / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('["setuptools", "torch"]', '["setuptools"]'))
    make_sdist(source, root / "links")
    server = serve(root)
    (root / "base").write_text(base_url(server))
    links = f"{os.environ.get('PIP_FIND_LINKS', '')} {root / 'links'}".strip()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_FIND_LINKS", links)
        yield root, server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def kernel_lock(
    release: tuple[Path, Server],
    kernel_lab: Lab,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path]:
    """(profile, lockfile): the kernel-stage profile with the community source declared, locked
    with the network (verl's wheelhouse states another torch, so the community's wheel is it)."""
    base = tmp_path_factory.mktemp("kernel-bundle-lock")
    other = {"torch": "2.12.0", "cuda": "cpu", "cxx11abi": "TRUE"}
    profile = lab_profile(release[0], base / "profile", verl_key=other)
    out = base / "kernel.lock.yaml"
    lock_cpu(profile, kernel_lab.repo, out)
    wheel = kernel_wheel(out)
    assert wheel.url == f"{(release[0] / 'base').read_text()}/{COMMUNITY}/v0.9.4/{NAME}"
    return profile, out


def bundle(lock: Path, output: Path, repo: Path) -> Run:
    """`bundle --lockfile LOCK -o OUTPUT` (no tool wheels), in this process."""
    argv = ["bundle", "--lockfile", str(lock), "-o", str(output), "--no-tool"]
    return run_cli([*argv, "--verl-source", str(repo)])


def test_a_changed_release_file_refuses_the_bundle_and_writes_none(
    release: tuple[Path, Server],
    kernel_lock: tuple[Path, Path],
    kernel_lab: Lab,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server's file is not the one locked: refused before anything else is downloaded
    (an empty cache, so the kernel wheel is downloaded now), and no archive or .part is left."""
    asset = release[0] / COMMUNITY / "v0.9.4" / NAME
    good = asset.read_bytes()
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out" / "kernel.tar"
    out.parent.mkdir()
    asset.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))
    try:
        run = bundle(kernel_lock[1], out, kernel_lab.repo)
        served = file_sha256(asset)
    finally:
        asset.write_bytes(good)
    assert run.code == EXIT_REFUSED, run.stderr
    recorded = kernel_wheel(kernel_lock[1]).sha256
    said = (
        f"serves {NAME} with sha256 {served}, not the {recorded} the lockfile records for "
        "standin-kernel; no bundle was written"
    )
    assert said in run.body["error"]["message"], run.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == []
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []  # nor kept


@pytest.fixture(scope="module")
def kernel_bundle(
    release: tuple[Path, Server],
    kernel_lock: tuple[Path, Path],
    kernel_lab: Lab,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The lock bundled (downloads in the tests' bundle cache); then the server is stopped."""
    out = tmp_path_factory.mktemp("kernel-bundle") / "kernel.tar"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERL_BOOTSTRAP_CACHE", str(BUNDLE_CACHE))
        run = bundle(kernel_lock[1], out, kernel_lab.repo)
    assert run.code == EXIT_OK, run.stderr
    assert run.body["kernel_wheels"] == [f"kernels/{NAME}"] and run.body["notes"] == []
    release[1].shutdown()
    release[1].server_close()  # a request now is refused at once
    return out


def test_the_bundle_carries_the_recorded_kernel_wheel(
    kernel_bundle: Path,
    kernel_lock: tuple[Path, Path],
    release: tuple[Path, Server],
) -> None:
    wheel = kernel_wheel(kernel_lock[1])
    members = manifest_of(kernel_bundle)["members"]
    [member] = [m for m in members if m["role"] == "kernel"]
    assert member == {
        "path": f"kernels/{NAME}",
        "sha256": wheel.sha256,
        "size": (release[0] / COMMUNITY / "v0.9.4" / NAME).stat().st_size,
        "role": "kernel",
        "name": "standin-kernel",
    }
    with tarfile.open(kernel_bundle) as tar:
        handle = tar.extractfile(member["path"])
        assert handle is not None
        assert hashlib.sha256(handle.read()).hexdigest() == wheel.sha256
    # the locked sdist is carried too: a host of another key still builds it, offline
    assert "standin-kernel" in {m["name"] for m in members if m["role"] == "artifact"}
    dry = run_cli(["bundle", "--lockfile", str(kernel_lock[1]), "--dry-run"])
    assert dry.body["kernel_wheels"] == 1, dry.stderr


def from_bundle(archive: Path, profile: Path, prefix: Path, *extra: str) -> Run:
    """`install --bundle` of the kernel lock, with a site config whose lab wheelhouse is empty."""
    site = prefix.parent / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {prefix.parent / 'empty-house'}\n")
    argv = ["install", "--bundle", str(archive), "--profile", str(profile)]
    return run_cli([*argv, "--prefix", str(prefix), "--config", str(site), *extra])


def test_an_install_from_the_bundle_takes_the_wheel_from_it_offline(
    kernel_bundle: Path,
    kernel_lock: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The release server is down: the plan names the bundle's file, the stage installs it
    (no compiler), and the env's record names the file's release URL and sha256."""
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))  # unpacked here
    profile, lock = kernel_lock
    wheel = kernel_wheel(lock)
    plan = from_bundle(kernel_bundle, profile, tmp_path / "env", "--dry-run")
    assert plan.code == EXIT_OK, plan.stderr
    kernel = next(s for s in plan.body["steps"] if s["id"] == "standin")["kernel"]
    assert kernel["source"] == "bundle", kernel
    assert kernel["reason"].startswith("prebuilt from the bundle, key torch 2.13+cpu")
    assert "(the file the lockfile records; nothing is downloaded)" in kernel["reason"]
    (unpacked,) = (tmp_path / "cache" / "bundles").iterdir()
    assert kernel["wheel"] == str(unpacked / "kernels" / NAME)
    assert file_sha256(Path(kernel["wheel"])) == wheel.sha256
    [entry] = Wheelhouse(unpacked / "kernels").entries()  # a wheelhouse of what the lock records
    assert (entry.file, entry.sha256) == (NAME, wheel.sha256)
    assert entry.key.to_json() == wheel.key.model_dump()

    run = from_bundle(kernel_bundle, profile, tmp_path / "env", "--yes")
    assert run.step("standin")["status"] == "done", json.dumps(run.body)[-3000:]
    log = run.log("standin")
    assert "prebuilt from the bundle" in log and "not available" not in log
    assert f"no compiler ran (installing {unpacked / 'kernels' / NAME})" in log
    assert COMPILED not in log
    recorded = kernel_wheel(env_lockfile(tmp_path / "env"))
    assert (recorded.source, recorded.url, recorded.sha256) == ("release", wheel.url, wheel.sha256)


def test_a_kernel_member_the_lockfile_does_not_record_is_refused(
    kernel_bundle: Path,
    kernel_lock: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another wheel in its place, with a manifest that agrees with it (the lockfile does not):
    the bundle's own manifest and lockfile, with that one member."""
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    other = b"PK\x05\x06" + bytes(18)  # an empty zip: not the recorded wheel
    manifest = manifest_of(kernel_bundle)
    [lockfile] = [m for m in manifest["members"] if m["role"] == "lockfile"]
    kernel = {
        "path": f"kernels/{NAME}",
        "sha256": hashlib.sha256(other).hexdigest(),
        "size": len(other),
        "role": "kernel",
    }
    manifest["members"] = [lockfile, kernel]
    files = {"manifest.json": json.dumps(manifest).encode()}
    files[lockfile["path"]] = kernel_lock[1].read_bytes()
    files[kernel["path"]] = other
    forged = tmp_path / "forged.tar"
    with tarfile.open(forged, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    run = from_bundle(forged, kernel_lock[0], tmp_path / "env")
    assert run.code == EXIT_REFUSED, run.stderr
    said = f"holds kernels/{NAME} (sha256 {kernel['sha256']}), which is not a kernel wheel its"
    assert said in run.body["error"]["message"]
    assert not (tmp_path / "env").exists()


def test_a_recorded_wheel_with_no_url_is_taken_from_the_lab_wheelhouse(
    kernel_lock: tuple[Path, Path],
    kernel_lab: Lab,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An env's record names a wheel of the lab wheelhouse (no URL): bundled from there by
    sha256; one the wheelhouse does not list is not carried, and the result says so."""
    [entry] = Wheelhouse(kernel_lab.wheelhouse).entries()
    data = yaml.safe_load(kernel_lock[1].read_text())
    [dist] = [
        d for s in data["stages"] for d in s["distributions"] if d["name"] == "standin-kernel"
    ]
    dist["kernel_wheel"] = {
        "file": entry.file,
        "sha256": entry.sha256,
        "source": "wheelhouse",
        "key": entry.key.to_json(),
    }
    record = tmp_path / "env.lock.yaml"
    record.write_text(yaml.safe_dump(data))
    site = tmp_path / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {kernel_lab.wheelhouse}\n")
    monkeypatch.setenv("VERL_BOOTSTRAP_CONFIG", str(site))
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(BUNDLE_CACHE))
    run = bundle(record, tmp_path / "record.tar", kernel_lab.repo)
    assert run.code == EXIT_OK, run.stderr
    [member] = [m for m in manifest_of(tmp_path / "record.tar")["members"] if m["role"] == "kernel"]
    assert (member["path"], member["sha256"]) == (f"kernels/{entry.file}", entry.sha256)

    empty = Wheelhouse(tmp_path / "empty-house")
    lock = read_lockfile(record)
    carried, notes = collect_kernel_wheels(lock, cache=tmp_path / "c", house=empty, work=tmp_path)
    assert carried == []
    assert notes == [
        f"standin-kernel: the lockfile's {entry.file} (sha256 {entry.sha256[:12]}…) has no URL "
        f"and is not in the lab wheelhouse {empty.root}: not carried (an install from the bundle "
        "builds the locked sdist)"
    ]
