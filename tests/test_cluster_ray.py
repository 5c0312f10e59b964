"""`cluster verify` on a real local Ray cluster of three nodes, one of whose envs differs.

The cluster is Ray's own (`ray.cluster_utils.Cluster`, started from the env's Python): three
raylets, each with its own environment. Two nodes keep the env at the lab env's prefix; the
third keeps it at a copy into which one extra package was installed, as a stray `pip install`
on one machine would. The prefix given to verl-bootstrap is '$VB_ENV', expanded on each node.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from labextras import make_wheel
from labfixtures import lab, lab_env, write_yaml

from verl_bootstrap import cli
from verl_bootstrap.installer.cmdline import uv_binary

pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

QUICK = {
    "schema_version": 1,
    "name": "cpu-quick",
    "extends": "cpu",
    "verify": {"imports": ["torch"], "versions": {"torch": "==2.13.0"}, "gpu_smoke": False},
}


@pytest.fixture(scope="module")
def envs() -> tuple[Path, Path]:
    """The lab env, and a copy with one extra package."""
    built = lab_env()
    if built.returncode != 0:
        pytest.fail("the lab env did not build: " + built.stderr[-2000:])
    copy = built.prefix.with_name("cpu-node-c")
    if not copy.exists():
        subprocess.run(["cp", "-al", str(built.prefix), str(copy)], check=True)
        wheel = make_wheel(lab().base)
        subprocess.run(
            [
                uv_binary(),
                "pip",
                "install",
                "--python",
                str(copy / "bin" / "python"),
                "--offline",
                "--no-index",
                str(wheel),
            ],
            check=True,
            capture_output=True,
        )
    return built.prefix, copy


@pytest.fixture(scope="module")
def cluster(envs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running three-node Ray cluster; node 3 keeps its env at the copy."""
    original, copy = envs
    nodes = [{"VB_ENV": str(original)}, {"VB_ENV": str(original)}, {"VB_ENV": str(copy)}]
    stop = tmp_path_factory.mktemp("ray") / "stop"
    helper = Path(__file__).with_name("raycluster.py")
    process = subprocess.Popen(
        [str(original / "bin" / "python"), str(helper), json.dumps(nodes), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        assert line, "the Ray cluster did not start"
        yield json.loads(line)["address"]
    finally:
        stop.touch()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def test_the_node_whose_env_differs_is_found_and_named(
    cluster: str,
    envs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    original, copy = envs
    monkeypatch.setenv("VB_ENV", str(original))  # this node's view of the prefix
    monkeypatch.setenv("HOME", str(tmp_path))  # the run's log goes under ~/.verl-bootstrap
    profile = write_yaml(tmp_path / "cpu-quick.yaml", QUICK)
    argv = [
        "cluster",
        "verify",
        "--ray-address",
        cluster,
        "--prefix",
        "$VB_ENV",
        "--profile",
        str(profile),
        "--json",
    ]
    code = cli.main(argv)
    body = json.loads(capsys.readouterr().out)
    assert code == 1, body
    assert len(body["nodes"]) == 3
    assert body["failures"] == [], body["failures"]
    by_prefix = {n["label"]: n["prefix"] for n in body["nodes"]}
    assert sorted(by_prefix.values()) == sorted([str(original), str(original), str(copy)])
    assert len(body["differences"]) == 1, body["differences"]
    difference = body["differences"][0]
    assert difference["field"] == "distributions"
    assert difference["detail"] == "+ tinyextra 0.1"
    assert by_prefix[difference["node"]] == str(copy)
    node = body["nodes"][0]
    assert node["verify"]["versions"] == {"torch": "2.13.0+cpu"}
    assert node["verl_commit"] == lab().commit
    assert node["lock_sha256"] and node["python"].startswith(f"{sys.version_info[0]}.")


def test_cluster_install_runs_on_every_node_and_reports_each(
    cluster: str,
    envs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    original, copy = envs
    monkeypatch.setenv("VB_ENV", str(original))
    monkeypatch.setenv("HOME", str(tmp_path))
    tool = tmp_path / "tool"  # stands in for verl-bootstrap on the nodes: says where it ran
    tool.write_text(f'#!/bin/sh\necho "ran $*"\n[ "$VB_ENV" != "{copy}" ]\n')
    tool.chmod(0o755)
    argv = [
        "cluster",
        "install",
        "--ray-address",
        cluster,
        "--prefix",
        "$VB_ENV",
        "--profile",
        "cpu",
        "--tool",
        str(tool),
        "--json",
    ]
    assert cli.main(argv) == 1
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "each-node"
    assert sorted(n["returncode"] for n in body["nodes"]) == [0, 0, 1]
    lines = sorted(n["tail"][0] for n in body["nodes"])
    assert lines == sorted(
        f"ran install --profile cpu --prefix {p} --wait 3600" for p in (original, original, copy)
    )
    assert body["verify"] is None
