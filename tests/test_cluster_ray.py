"""`cluster verify` on a real local Ray cluster of three nodes, one of whose envs differs.

The cluster is Ray's own (`ray.cluster_utils.Cluster`, started from the env's Python): three
raylets, each with its own environment. Two nodes keep the env at the lab env's prefix; the
third keeps it at a copy into which one extra package was installed, as a stray `pip install`
on one machine would. The prefix given to verl-bootstrap is '$VB_ENV', expanded on each node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from labextras import make_wheel
from labfixtures import lab, lab_env, write_yaml
from labmate import THEIRS, need_two_users, plant_env, sticky_folder
from scaffold import TOOL

from verl_bootstrap import cli
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.verify.trainroute import Route

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

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
def scratch() -> Iterator[Path]:
    """A folder everyone may write, where each node keeps a node-local prefix ($VB_SCRATCH)."""
    with sticky_folder() as path:
        yield path


@pytest.fixture(scope="module")
def cluster(
    envs: tuple[Path, Path], scratch: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A running three-node Ray cluster; node 3 keeps its env at the copy. Each node's
    node-local prefix is $VB_SCRATCH: scratch/node-1, node-2, node-3."""
    original, copy = envs
    nodes = [{"VB_ENV": str(original)}, {"VB_ENV": str(original)}, {"VB_ENV": str(copy)}]
    nodes = [{**env, "VB_SCRATCH": str(scratch / f"node-{i}")} for i, env in enumerate(nodes, 1)]
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


@pytest.fixture
def this_node(
    envs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """This node's view of the prefix (node 1's env) and a HOME of the test's (the run's log goes
    under ~/.verl-bootstrap); returns the two envs."""
    monkeypatch.setenv("VB_ENV", str(envs[0]))
    monkeypatch.setenv("HOME", str(tmp_path))
    return envs


def test_the_node_whose_env_differs_is_found_and_named(
    cluster: str, this_node: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original, copy = this_node
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
    cluster: str, this_node: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original, copy = this_node
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


def test_train_runs_one_real_sft_step_on_every_node(
    cluster: str, this_node: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cluster verify --train sft` through Ray: each node's task runs the tool's own
    `verify --train sft` in that node's env, all three at once (two of them in one prefix)."""
    original, copy = this_node
    profile = write_yaml(tmp_path / "cpu-quick.yaml", QUICK)
    argv = ["cluster", "verify", "--ray-address", cluster, "--prefix", "$VB_ENV"]
    argv += ["--profile", str(profile), "--train", "sft", "--tool", str(TOOL), "--json"]
    assert cli.main(argv) == 1  # node 3's extra package still differs
    body = json.loads(capsys.readouterr().out)
    assert body["failures"] == [], body["failures"]
    assert [d["detail"] for d in body["differences"]] == ["+ tinyextra 0.1"]
    trained = [n["train"] for n in body["nodes"]]
    assert len(trained) == 3
    for train in trained:
        assert train["ok"] and train["level"] == "sft" and train["route"] == "cpu", train
        assert {c["name"] for c in train["checks"] if c["status"] == "ok"} == {
            "loss",
            "gradient",
            "weights changed",
            "resume",
        }
        weights = train["figures"]["weights"]
        assert weights["changed"] == weights["compared"] > 0
    for prefix in (original, copy):  # each node trained in its own scratch, since removed
        assert not list(prefix.glob(".verl-bootstrap/train/sft"))


def test_a_node_whose_env_another_user_made_again_is_refused_and_runs_nothing(
    cluster: str,
    this_node: tuple[Path, Path],
    scratch: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Node 3's node-local prefix, purged, made again by the lab mate (a second real user) with a
    python of hers: node 3 is refused, naming her, and her python never runs; nodes 1 and 2
    (links to the lab's env) pass. On main node 3's task ran her python as the victim."""
    need_two_users()
    original, _ = this_node
    marker = tmp_path / "ran-as-victim"
    for node in ("node-1", "node-2"):
        (scratch / node).symlink_to(original)
    plant_env(scratch / "node-3", marker)
    profile = write_yaml(tmp_path / "cpu-quick.yaml", QUICK)
    argv = ["cluster", "verify", "--ray-address", cluster, "--prefix", "$VB_SCRATCH"]
    argv += ["--ray-python", str(original / "bin" / "python")]  # no $VB_SCRATCH on this node
    assert cli.main([*argv, "--profile", str(profile), "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    refused = next(n for n in body["nodes"] if n["prefix"] == str(scratch / "node-3"))
    assert body["failures"] == [
        {
            "node": refused["label"],
            "failure": f"not yours: {scratch / 'node-3'} {THEIRS} "
            "(nothing of the env was run on this node)",
        }
    ]
    assert body["differences"] == []
    passed = [n for n in body["nodes"] if n.get("verify")]
    assert len(passed) == 2 and all(
        n["verify"]["versions"] == {"torch": "2.13.0+cpu"} for n in passed
    )
    assert not marker.exists()


_JOIN = """
import json, ray
ray.init(num_cpus=1, num_gpus=1, include_dashboard=False)
print(json.dumps({"gcs": ray.get_runtime_context().gcs_address}))
ray.shutdown()
"""


def test_the_training_step_starts_a_ray_of_its_own_beside_a_running_cluster(
    cluster: str, envs: tuple[Path, Path]
) -> None:
    """With a Ray cluster running on the machine (its address in /tmp/ray, as `ray start`
    leaves it), a bare ray.init() joins it, and the RL step's placeholder units are refused; the
    training step's variables make verl's ray.init() start a Ray of its own."""
    python = envs[0] / "bin" / "python"
    argv = [str(python), "-c", _JOIN]
    bare = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert bare.returncode != 0
    assert "must not be provided" in bare.stderr, bare.stderr[-2000:]
    step = Route(python=python, name="cpu", rollout="hf").environment()
    env = {**os.environ, **{k: v for k, v in step.items() if v is not None}}
    own = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert own.returncode == 0, own.stderr[-2000:]
    started = json.loads(own.stdout.strip().splitlines()[-1])["gcs"]
    assert started and started != cluster
