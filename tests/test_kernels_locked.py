"""The lab wheelhouse beyond one resolving install, with the stand-in kernel of tests/kernellab.py:
`cluster install` (a locked install on each node) builds the locked sdist once and publishes it,
the next node takes the wheel with no compiler, the env's record names that wheel (sha256, key),
and a `--locked` plan says which route each kernel stage takes."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from kernellab import PROFILE, Lab, lock_cpu
from scaffold import TOOL, run_cli
from slurmcluster import SlurmCluster

from verl_bootstrap.errors import EXIT_OK, InputError
from verl_bootstrap.kernels.wheelhouse import Wheelhouse
from verl_bootstrap.lock.format import KernelWheel
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import env_lockfile, logs_dir

COMPILED = "standin.cpp -o"  # the compiler line of the stand-in's one unit


@pytest.fixture(scope="module")
def lock(lab_here: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kernel-stage profile locked: the stand-in is a locked sdist (it has no wheel)."""
    path = tmp_path_factory.mktemp("kernel-lock") / "kernel-stage.lock.yaml"
    lock_cpu(PROFILE, lab_here.repo, path)
    [dist] = [
        d for s in read_lockfile(path).stages for d in s.distributions if d.name == "standin-kernel"
    ]
    assert dist.source == "sdist"
    return path


def kernel_wheel(prefix: Path) -> KernelWheel:
    dist = read_lockfile(env_lockfile(prefix)).distributions()["standin-kernel"]
    assert dist.kernel_wheel is not None
    return dist.kernel_wheel


def stage_log(prefix: Path) -> str:
    return "".join(p.read_text() for p in sorted(logs_dir(prefix).rglob("standin.log")))


@pytest.fixture(scope="module")
def nodes(
    lab_here: Lab, lock: Path, slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, Path]:
    """`cluster install --slurm` of the lock on a real Slurm (tests/slurmcluster.py), one node
    after the other, each with its own prefix, sharing the site config's wheelhouse. Each is its
    own one-node job (--submit --nodes 1): the second must come after the first, which one
    allocation's concurrent tasks would not promise. The nodes' tool names the test's verl repo
    (the profile's default repository is not reachable here)."""
    base = tmp_path_factory.mktemp("kernel-nodes")
    house, site, tool = base / "lab-house", base / "site.yaml", base / "tool"
    site.write_text(f"schema_version: 1\nwheelhouse: {house}\n")
    tool.write_text(f'#!/bin/sh\nexec "{TOOL}" "$@" --verl-source "{lab_here.repo}"\n')
    tool.chmod(0o755)
    prefixes = [base / "node0", base / "node1"]
    argv = ["cluster", "install", "--slurm", "--submit", "--nodes", "1", "--prefix", "$VB_ENV"]
    argv += ["--profile", str(PROFILE), "--lockfile", str(lock), "--config", str(site)]
    for prefix in prefixes:
        with pytest.MonkeyPatch.context() as patch:
            for key, value in slurm_cluster.environ().items():
                patch.setenv(key, value)
            patch.setenv("VB_ENV", str(prefix))
            # verify fails on `uv pip check`: verl comes without its dependencies
            run = run_cli([*argv, "--tool", str(tool)])
    for prefix in prefixes:
        assert env_lockfile(prefix).is_file(), json.dumps(run.body)[-3000:]
    return house, prefixes[0], prefixes[1]


def test_cluster_install_builds_the_locked_sdist_once_and_publishes_it(
    nodes: tuple[Path, Path, Path],
) -> None:
    house, first, _ = nodes
    log = stage_log(first)
    assert "source build of the locked sdist: no wheel in the lab wheelhouse" in log
    assert COMPILED in log
    [entry] = Wheelhouse(house).entries()
    assert f"published {entry.file} to {house}" in log
    wheel = kernel_wheel(first)
    assert (wheel.source, wheel.sha256, wheel.file) == ("build", entry.sha256, entry.file)


def test_the_next_node_takes_the_wheel_without_a_compiler(nodes: tuple[Path, Path, Path]) -> None:
    house, _, second = nodes
    log = stage_log(second)
    [entry] = Wheelhouse(house).entries()
    assert f"prebuilt from the lab wheelhouse, key {entry.key.describe()}, sha256" in log
    assert COMPILED not in log and "no compiler ran" in log
    wheel = kernel_wheel(second)
    assert (wheel.source, wheel.sha256) == ("wheelhouse", entry.sha256)
    assert wheel.key.model_dump() == entry.key.to_json()


def locked_plan(lock: Path, prefix: Path, house: Path, repo: Path) -> str:
    site = prefix.parent / f"{house.name}.site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {house}\n")
    argv = [
        "plan",
        "--profile",
        str(PROFILE),
        "--prefix",
        str(prefix),
        "--locked",
        "--lockfile",
        str(lock),
        "--config",
        str(site),
        "--verl-source",
        str(repo),
    ]
    plan = run_cli(argv)
    assert plan.code == EXIT_OK, plan.stderr
    return str(next(s for s in plan.body["steps"] if s["id"] == "standin")["kernel"]["reason"])


def test_a_locked_plan_of_a_record_takes_the_same_file_or_says_it_builds(
    lab_here: Lab, nodes: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    house, first, _ = nodes
    record = env_lockfile(first)  # names the wheel node0 built and published
    reason = locked_plan(record, tmp_path / "env", house, lab_here.repo)
    assert reason.startswith("prebuilt from the lab wheelhouse, key torch 2.13.0+cpu")
    assert reason.endswith("(the file the lockfile records)")
    empty = locked_plan(record, tmp_path / "env", tmp_path / "empty-house", lab_here.repo)
    assert empty.startswith("source build of the locked sdist: the lockfile's standin_kernel")
    assert "is not in the wheelhouse" in empty


def test_a_lockfile_refuses_a_kernel_wheel_url_with_credentials(
    nodes: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Lockfiles are shared and untrusted: a recorded wheel's fields are shaped and checked."""
    data = yaml.safe_load(env_lockfile(nodes[1]).read_text())
    [dist] = [
        d for s in data["stages"] for d in s["distributions"] if d["name"] == "standin-kernel"
    ]
    dist["kernel_wheel"]["url"] = "https://user:secret@h.invalid/standin.whl"
    bad = tmp_path / "bad.lock.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"kernel_wheel\.url: .*without credentials"):
        read_lockfile(bad)


class _Served(http.server.SimpleHTTPRequestHandler):
    """The lab wheelhouse folder behind a web server that wants a login (as a lab's would)."""

    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Basic " + base64.b64encode(b"lab:s3cret").decode():
            self.send_error(401)
            return
        self.paths.append(self.path)
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served_house(lab_here: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The lab's wheelhouse at a loopback URL; the login comes from a netrc, as pip's would."""
    handler = functools.partial(_Served, directory=str(lab_here.wheelhouse))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login lab password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    _Served.paths.clear()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    thread.join()


def test_a_wheelhouse_url_is_read_never_written(
    lab_here: Lab, lock: Path, nodes: tuple[Path, Path, Path], served_house: str, tmp_path: Path
) -> None:
    """node1's kernel stage again, with the lab's wheelhouse given as an index URL: the wheel is
    taken from it by key, hash-checked, and nothing is published there."""
    _, _, second = nodes
    site = tmp_path / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {served_house}\n")
    before = (lab_here.wheelhouse / "index.json").read_bytes()
    run = run_cli(
        [
            "install",
            "--profile",
            str(PROFILE),
            "--prefix",
            str(second),
            "--locked",
            "--lockfile",
            str(lock),
            "--verl-source",
            str(lab_here.repo),
            "--config",
            str(site),
            "--force",
            "standin",
            "--yes",
        ]
    )
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    [entry] = Wheelhouse(lab_here.wheelhouse).entries()
    assert f"prebuilt from the lab wheelhouse, key {entry.key.describe()}" in log
    assert COMPILED not in log and "no compiler ran" in log
    assert set(_Served.paths) == {"/index.json", f"/{entry.file}"}  # the index: plan and run
    assert (lab_here.wheelhouse / "index.json").read_bytes() == before
    # downloaded into the env's own folder, then installed after its sha256 matched the index
    assert f"sha256 {entry.sha256[:12]}" in log
    assert (
        f"no compiler ran (installing {second}/.verl-bootstrap/kernels/standin/wheelhouse/" in log
    )
    assert "s3cret" not in log + run.stderr + json.dumps(run.body)


def test_a_wheelhouse_wheel_in_place_of_the_locked_sdist_is_a_named_hash_gap(
    lab_here: Lab, lock: Path, nodes: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The lockfile pins the stand-in's sdist and records no wheel: a lab-wheelhouse wheel of
    its key is taken, checked by the wheelhouse's sha256 and its key, not the lockfile's. The
    plan, its route line and `hash_gaps` name that gap (on main: "every artifact hash-checked",
    `hash_gaps: []`)."""
    house, _, _ = nodes
    site = tmp_path / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {house}\n")
    argv = ["plan", "--profile", str(PROFILE), "--prefix", str(tmp_path / "env"), "--locked"]
    argv += ["--lockfile", str(lock), "--config", str(site), "--verl-source", str(lab_here.repo)]
    plan = run_cli(argv)
    assert plan.code == EXIT_OK, plan.stderr
    step = next(s for s in plan.body["steps"] if s["id"] == "standin")
    assert step["kernel"]["reason"].startswith("prebuilt from the lab wheelhouse")
    assert "the lockfile pins the sdist, not this wheel" in step["kernel"]["reason"]
    gaps = plan.body["hash_gaps"]
    assert any(
        "the prebuilt wheel kernel stage standin takes in place of the sdist" in g for g in gaps
    )
    assert "hash-checked but for" in plan.body["route"]["line"], plan.body["route"]
