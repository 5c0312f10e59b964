"""Offline bundles for real: the cpu lock bundled from the real index, installed from the bundle
in a network namespace with no interfaces (through the bundle's own install.sh, run by the
Apptainer definition's %post: see conftest's offline_image), then verified against the lock;
tampered and misfitting bundles are refused before anything is installed or unpacked.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest
from bundlefixtures import (
    bundle_tool,
    flip_byte,
    manifest_of,
    manifest_only,
    no_network,
    tool_env,
)
from scaffold import REPO
from verlrepo import git

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_REFUSED
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.lookup import hashed_dists


def test_the_bundle_holds_every_locked_artifact_verl_and_the_tool(
    cpu_bundle: Path, cpu_lock: Path
) -> None:
    with tarfile.open(cpu_bundle) as tar:
        names = tar.getnames()
        sums = {
            info.name: hashlib.sha256(tar.extractfile(info).read()).hexdigest()  # type: ignore[union-attr]
            for info in tar.getmembers()
            if info.name != "manifest.json"
        }
    manifest = manifest_of(cpu_bundle)
    assert names[0] == "manifest.json"
    assert {m["path"]: m["sha256"] for m in manifest["members"]} == sums
    lock = read_lockfile(cpu_lock)
    assert manifest["lockfile_sha256"] == hashlib.sha256(cpu_lock.read_bytes()).hexdigest()
    assert (manifest["platform"], manifest["variant"], manifest["python"]) == (
        lock.platform,
        lock.cuda.variant,
        lock.python,
    )
    bundled = set(sums.values())
    for dist in hashed_dists(lock):
        assert set(dist.hashes) <= bundled, dist.name
    tool = {Path(m["path"]).name.split("-")[0] for m in manifest["members"] if m["role"] == "tool"}
    assert {"verl_bootstrap", "uv", "pydantic"} <= tool
    assert "verl/verl.gitbundle" in sums and "install.sh" in sums
    # the build requirements of the locked sdists (antlr4's setup.py build: setuptools, wheel)
    index = {m["name"] for m in manifest["members"] if m["role"] in ("artifact", "build")}
    assert {"setuptools", "wheel"} <= index
    assert any(m["role"] == "build" for m in manifest["members"])


def test_installing_from_the_bundle_needs_no_network_and_ends_verified(
    offline_image: tuple[Path, str], cpu_lock: Path, verl_repo_session: Path
) -> None:
    root, output = offline_image
    prefix = root / "verl"
    assert "every sha256 matches its manifest" in output and "verified" in output
    done = bundle_tool("verify", "--prefix", str(prefix), "--against", str(cpu_lock))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the env matches" in done.stdout and "note:" not in done.stdout
    head = git(verl_repo_session, "rev-parse", "HEAD")
    assert git(prefix / "src" / "verl", "rev-parse", "HEAD") == head
    (unpacked,) = (root / "cache" / "bundles").iterdir()  # kept in the tool's cache, for reuse
    assert (unpacked / "lockfile" / cpu_lock.name).read_bytes() == cpu_lock.read_bytes()


def test_the_network_really_was_cut_off() -> None:
    """What the offline install ran under reaches nothing, not even a server on this machine
    that the same probe reaches without the cut."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    probe = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=5); print('REACHED')"
    try:
        argv = [*no_network(), sys.executable, "-c", probe]
        cut = subprocess.run(argv, capture_output=True, text=True, check=False, env=tool_env())
        plain = {**os.environ, "NO_PROXY": "*"}
        direct = subprocess.run(argv[-3:], capture_output=True, text=True, check=False, env=plain)
    finally:
        server.shutdown()
    assert "REACHED" in direct.stdout, direct.stderr
    assert cut.returncode != 0 and "REACHED" not in cut.stdout


def test_a_tampered_member_is_refused_before_anything_is_installed(
    cpu_bundle: Path, tmp_path: Path
) -> None:
    torch = next(m["path"] for m in manifest_of(cpu_bundle)["members"] if m.get("name") == "torch")
    bad = flip_byte(cpu_bundle, tmp_path / "bad.tar", torch)
    prefix, cache = tmp_path / "envs" / "fresh", tmp_path / "cache"
    env = tool_env(VERL_BOOTSTRAP_CACHE=str(cache))
    done = bundle_tool(
        "--bundle",
        str(bad),
        "--profile",
        "cpu",
        "--prefix",
        str(prefix),
        "--json",
        env=env,
        prefix=no_network(),
    )
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    assert json.loads(done.stdout)["error"]["data"] == {"problem": "sha256", "members": [torch]}
    assert not prefix.exists()
    (unpacked,) = (cache / "bundles").iterdir()
    assert not list(unpacked.rglob("torch-*")), "the altered member is not left behind"


@pytest.mark.parametrize(
    "change",
    [{"platform": "linux-aarch64"}, {"python": "3.99"}, {"glibc": "9.99"}, {"variant": "cu128"}],
)
def test_a_bundle_for_another_host_is_refused_before_anything_is_unpacked(
    cpu_bundle: Path, tmp_path: Path, change: dict[str, str]
) -> None:
    other = manifest_only(cpu_bundle, tmp_path / "other.tar", **change)
    prefix = tmp_path / "envs" / "fresh"
    argv = ["--bundle", str(other), "--profile", "cpu", "--prefix", str(prefix), "--json"]
    done = bundle_tool(*argv, prefix=no_network())
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    data = json.loads(done.stdout)["error"]["data"]
    assert data == {"misfits": list(change), "unpacked": False}
    assert not (tmp_path / "envs").exists()


def test_a_member_outside_the_bundle_or_a_non_bundle_is_bad_input(
    cpu_bundle: Path, tmp_path: Path
) -> None:
    members = [{"path": "../escape", "sha256": "0" * 64, "size": 1, "role": "artifact"}]
    outside = manifest_only(cpu_bundle, tmp_path / "outside.tar", members=members)
    done = bundle_tool(
        "--bundle", str(outside), "--profile", "cpu", "--prefix", str(tmp_path / "env")
    )
    assert done.returncode == EXIT_BAD_INPUT and "outside the bundle" in done.stderr
    plain = tmp_path / "plain.tar"
    with tarfile.open(plain, "w") as tar:
        tar.add(REPO / "pyproject.toml", arcname="pyproject.toml")
    done = bundle_tool(
        "--bundle", str(plain), "--profile", "cpu", "--prefix", str(tmp_path / "env")
    )
    assert done.returncode == EXIT_BAD_INPUT and "not a verl-bootstrap bundle" in done.stderr
    assert not (tmp_path / "env").exists()


def test_plan_with_a_bundle_shows_its_lockfile_and_leaves_nothing_unpacked(
    cpu_bundle: Path, tmp_path: Path
) -> None:
    """Opening a bundle is a step of planning: `plan --bundle` checks and unpacks it into a
    scratch folder it removes, and leaves the tool's cache and the env's folder untouched."""
    cache, scratch, prefix = tmp_path / "cache", tmp_path / "tmp", tmp_path / "envs" / "fresh"
    scratch.mkdir()
    env = tool_env(VERL_BOOTSTRAP_CACHE=str(cache), TMPDIR=str(scratch))
    argv = ["plan", "--bundle", str(cpu_bundle), "--profile", "cpu", "--prefix", str(prefix)]
    done = bundle_tool(*argv, "--json", env=env, prefix=no_network())
    assert done.returncode == 0, done.stdout + done.stderr
    route = json.loads(done.stdout)["route"]
    assert route["kind"] == "lockfile"
    assert Path(route["lockfile"]).name == read_lockfile_name(cpu_bundle)
    assert "every sha256 matches its manifest" in done.stderr
    assert "removed after the plan" in done.stderr
    assert not (cache / "bundles").exists()
    assert list(scratch.iterdir()) == []
    assert not prefix.exists()


def read_lockfile_name(bundle: Path) -> str:
    """The name of the lockfile a bundle holds (its manifest says which member it is)."""
    return Path(str(manifest_of(bundle)["lockfile"])).name
