"""`cluster verify|install|script --slurm` on a real Slurm (tests/slurmcluster.py): three nodes,
n1 to n3, served by three slurmd on this host.

The lab's cpu env (the one the Ray tests use) is verified under `salloc`, by the batch script
under `sbatch --wait`, and installed again on every node by `cluster install`. Real venvs that
differ by one package stand for nodes whose envs drifted apart: the prefix
'$VB_BASE/$SLURMD_NODENAME' is expanded on each node, and n3's folder holds the venv with the
extra package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cpuenv import install_cpu_env
from labextras import make_wheel
from labfixtures import clean_environ, lab, lab_env, write_yaml
from labmate import THEIRS, need_two_users, plant_env, sticky_folder
from scaffold import TOOL
from slurmcluster import SlurmCluster

from verl_bootstrap import cli
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.machine.host.filesystems import parse_mountinfo

pytestmark = pytest.mark.timeout(600)

# The checks of verify and the batch script: torch's version, read without importing it. The
# cpu profile's own imports take twenty seconds here (`cluster install` runs them, after the
# install), and `sbatch --wait` polls at 2, 10 and 42 seconds: a job of 20 seconds takes 42.
QUICK = {
    "schema_version": 1,
    "name": "cpu-quick",
    "extends": "cpu",
    "verify": {"imports": ["json"], "versions": {"torch": "==2.13.0"}, "gpu_smoke": False},
}


@pytest.fixture(scope="module")
def built() -> Path:
    """The lab's verified cpu env (built once per process, shared with the Ray tests)."""
    env = lab_env()
    if env.returncode != 0:
        pytest.fail("the lab env did not build: " + env.stderr[-2000:])
    return env.prefix


def _run(cluster: SlurmCluster, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**cluster.environ(clean_environ()), "HOME": str(cwd)}
    return subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_verify_under_salloc_reads_every_answer_of_a_real_env(
    slurm_cluster: SlurmCluster, built: Path, tmp_path: Path
) -> None:
    quick = write_yaml(tmp_path / "quick.yaml", QUICK)
    argv = ["salloc", "-N1", str(TOOL), "cluster", "verify", "--slurm", "--prefix", str(built)]
    argv += ["--profile", str(quick), "--json"]
    done = _run(slurm_cluster, argv, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["ok"] and body["failures"] == [] and body["differences"] == []
    (node,) = body["nodes"]
    assert node["label"] == "n1"  # Slurm's name for the node
    assert node["verl_commit"] == lab().commit and node["lock_sha256"]
    assert node["verify"]["versions"] == {"torch": "2.13.0+cpu"}
    assert len(json.dumps(node)) > 4096  # an answer srun cuts into several labelled pieces


def test_the_batch_script_runs_under_sbatch(
    slurm_cluster: SlurmCluster, built: Path, tmp_path: Path
) -> None:
    script = tmp_path / "verify.sbatch"
    quick = write_yaml(tmp_path / "quick.yaml", QUICK)
    argv = ["cluster", "script", "--slurm", "--nodes", "1", "--prefix", str(built)]
    argv += ["--profile", str(quick)]
    made = _run(
        slurm_cluster, [str(TOOL), *argv, "--time", "00:10:00", "-o", str(script)], tmp_path
    )
    assert made.returncode == 0, made.stderr
    done = _run(slurm_cluster, ["sbatch", "--wait", "--parsable", str(script)], tmp_path)
    job = done.stdout.strip().split(";")[0]
    output = (tmp_path / f"verl-bootstrap-verify-{job}.out").read_text()
    assert done.returncode == 0, output
    assert "the 1 node passes" in output and "\nn1    ok" in output


def test_cluster_install_runs_the_locked_install_on_the_node_then_verifies(
    slurm_cluster: SlurmCluster, built: Path, tmp_path: Path
) -> None:
    config = lab_env().config
    argv = ["salloc", "-N1", str(TOOL), "cluster", "install", "--slurm", "--prefix", str(built)]
    argv += ["--profile", "cpu", "--config", str(config), "--json"]
    done = _run(slurm_cluster, argv, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["mode"] == "each-node" and body["ok"]
    assert [(n["label"], n["returncode"]) for n in body["nodes"]] == [("n1", 0)]
    node = body["verify"]["nodes"][0]  # the env's own checks: the cpu profile's
    assert body["verify"]["ok"] and node["label"] == "n1"
    assert {i["module"] for i in node["verify"]["imports"] if i["ok"]} >= {"torch", "verl", "ray"}


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder per node: n1 and n2 hold one venv, n3 the same plus one extra package."""
    base = tmp_path_factory.mktemp("nodes")
    made = []
    for name in ("a", "b"):
        prefix = base / f"venv-{name}"
        subprocess.run(
            [uv_binary(), "venv", "-q", "--python", sys.executable, str(prefix)], check=True
        )
        made.append(prefix)
    extra = ["--offline", "--no-index", str(make_wheel(base))]
    python = str(made[1] / "bin" / "python")
    subprocess.run([uv_binary(), "pip", "install", "-q", "--python", python, *extra], check=True)
    for node, venv in (("n1", made[0]), ("n2", made[0]), ("n3", made[1])):
        (base / node).symlink_to(venv)
    return base


@pytest.fixture
def nodes(
    slurm_cluster: SlurmCluster, venvs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """This process pointed at the cluster, outside an allocation; the per-node folders."""
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    for key, value in slurm_cluster.environ().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("VB_BASE", str(venvs))
    monkeypatch.setenv("HOME", str(tmp_path))
    return venvs


PER_NODE = ["--prefix", "$VB_BASE/$SLURMD_NODENAME", "--submit", "--nodes", "3"]


def test_the_node_whose_env_differs_is_named_by_its_slurm_name(
    nodes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["cluster", "verify", "--slurm", *PER_NODE, "--json"])
    body = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [n["label"] for n in body["nodes"]] == ["n1", "n2", "n3"]
    assert body["differences"] == [
        {"node": "n3", "field": "distributions", "detail": "+ tinyextra 0.1"}
    ]
    # these venvs hold no verl: the default checks fail on every node, and say so
    assert ("n1", "import verl") in {(f["node"], f["failure"][:11]) for f in body["failures"]}


def test_the_table_marks_the_differing_cell(
    nodes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["cluster", "verify", "--slurm", *PER_NODE, "--fingerprint-only"]) == 1
    text = capsys.readouterr().out
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("n")}
    assert "≠" in rows["n3"] and "≠" not in rows["n1"]
    assert "  n3: distributions: + tinyextra 0.1" in text


def test_a_node_without_the_env_and_an_env_whose_python_dies_are_per_node_errors(
    nodes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report runs in the node's python3, the env's python under it: n2's python says
    noise, half an answer and exits 3, and n2's report says so (a task itself cut short or
    killed: test_cluster_frames.py)."""
    base = tmp_path / "nodes"
    base.mkdir()
    (base / "n1").symlink_to(nodes / "n1")
    (base / "n2" / "bin").mkdir(parents=True)
    dying = "#!/bin/sh\necho noise >&2\necho '@@VB-ANSWER@@ begin 9 %s 2'\nexit 3\n" % ("0" * 64)
    (base / "n2" / "bin" / "python").write_text(dying)
    (base / "n2" / "bin" / "python").chmod(0o755)
    monkeypatch.setenv("VB_BASE", str(base))
    argv = ["cluster", "verify", "--slurm", *PER_NODE, "--fingerprint-only", "--json"]
    assert cli.main(argv) == 1
    failures = {f["node"]: f["failure"] for f in json.loads(capsys.readouterr().out)["failures"]}
    assert failures["n3"] == f"no env at {base / 'n3'}"
    assert failures["n2"] == "the checks exited 3: noise"


def test_a_node_whose_env_another_user_made_again_is_refused_and_runs_nothing(
    nodes: Path,
    built: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A node-local prefix, purged, made again on n2 by the lab mate (a second real user) with a
    python of hers: n2 is refused, naming her, and her python never runs; n1 and n3 pass. On
    main n2's task ran her python as the victim."""
    need_two_users()
    quick = write_yaml(tmp_path / "quick.yaml", QUICK)
    marker = tmp_path / "ran-as-victim"
    with sticky_folder() as scratch:
        (scratch / "n1").symlink_to(built)  # the lab's env, on n1 and n3
        (scratch / "n3").symlink_to(built)
        plant_env(scratch / "n2", marker)
        monkeypatch.setenv("VB_BASE", str(scratch))
        argv = ["cluster", "verify", "--slurm", *PER_NODE, "--profile", str(quick), "--json"]
        assert cli.main(argv) == 1
        body = json.loads(capsys.readouterr().out)
        assert body["failures"] == [
            {
                "node": "n2",
                "failure": f"not yours: {scratch / 'n2'} {THEIRS} "
                "(nothing of the env was run on this node)",
            }
        ]
        assert body["differences"] == []
        passed = [n["label"] for n in body["nodes"] if n.get("verify")]
        assert passed == ["n1", "n3"]
        assert not marker.exists()


def test_outside_an_allocation_it_says_how_to_get_one(
    nodes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["cluster", "verify", "--slurm", "--prefix", "/p"]) == 2
    text = capsys.readouterr().err
    assert "SLURM_JOB_ID is unset" in text and "salloc -N 2 verl-bootstrap" in text
    assert cli.main(["cluster", "verify", "--slurm", "--prefix", "/p", "--submit"]) == 2
    assert "--submit needs --nodes N" in capsys.readouterr().err


def test_time_and_partition_go_to_the_job_steps(
    nodes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = tmp_path / "tool"  # stands in for verl-bootstrap: reports the job's time limit
    tool.write_text('#!/bin/sh\nsqueue -h -j "$SLURM_JOB_ID" -o "limit %l"\n')
    tool.chmod(0o755)
    argv = ["cluster", "install", "--slurm", "--profile", "cpu", "--tool", str(tool), "--json"]
    assert cli.main([*argv, *PER_NODE, "--time", "7", "--partition", "debug"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert [n["tail"][0] for n in body["nodes"]] == ["limit 7:00"] * 3
    assert cli.main([*argv, *PER_NODE, "--partition", "nosuch"]) == 1  # as for an unreachable Ray
    assert "srun ran no task" in capsys.readouterr().err


def test_install_runs_the_command_on_every_node_and_names_the_failing_one(
    nodes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = tmp_path / "tool"
    tool.write_text('#!/bin/sh\necho "ran $* on $SLURMD_NODENAME"\n[ "$SLURMD_NODENAME" != n2 ]\n')
    tool.chmod(0o755)
    argv = ["cluster", "install", "--slurm", *PER_NODE, "--profile", "cpu"]
    argv += ["--lockfile", "/labs/cpu.lock.yaml", "--tool", str(tool), "--json"]
    assert cli.main(argv) == 1
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "each-node" and body["lock_scope"]["scope"] == "local"
    assert [(n["label"], n["returncode"]) for n in body["nodes"]] == [
        ("n1", 0),
        ("n2", 1),
        ("n3", 0),
    ]
    assert body["nodes"][0]["tail"][0] == (
        f"ran install --profile cpu --prefix {nodes}/n1 --wait 3600 --locked --lockfile "
        "/labs/cpu.lock.yaml on n1"
    )
    assert body["verify"] is None  # a failed install is not verified


def test_an_env_on_a_shared_filesystem_is_built_once_then_verified_everywhere(
    nodes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nfs = parse_mountinfo(f"40 22 0:50 / {nodes} rw - nfs4 fs1:/export/envs rw,vers=4.2\n")
    monkeypatch.setattr("verl_bootstrap.lab.cluster.run.read_mounts", lambda: nfs)
    tool = tmp_path / "tool"
    tool.write_text('#!/bin/sh\necho "ran $* on ${SLURMD_NODENAME:-the login node}"\n')
    tool.chmod(0o755)
    argv = ["cluster", "install", "--slurm", *PER_NODE, "--profile", "cpu", "--tool", str(tool)]
    assert cli.main([*argv, "--json"]) == 1  # these venvs hold no verl: the verification fails
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "once" and body["lock_scope"]["scope"] == "cluster"
    here = f"ran install --profile cpu --prefix {nodes}/$SLURMD_NODENAME --wait 3600"
    assert [n["tail"] for n in body["nodes"]] == [[f"{here} on the login node"]]
    assert [n["label"] for n in body["verify"]["nodes"]] == ["n1", "n2", "n3"]


@pytest.fixture(scope="module")
def trainable(tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path) -> Path:
    """This module's own cpu env (verl 0.9.1) for the training steps, which record into it."""
    installed = install_cpu_env(tmp_path_factory, verl_repo_session)
    assert installed.first.code == 0, installed.first.stderr
    return installed.prefix


def _view_without(built: Path, dest: Path, module: str) -> Path:
    """A node's own view of the env: a tree of links to `built` (the venv's python finds its
    pyvenv.cfg there, so its site-packages are the view's) with its own copy of the tool's
    record, verl's editable install pointed at the view's verl, and one verl module removed."""
    subprocess.run(["cp", "-as", str(built), str(dest)], check=True)
    state = dest / ".verl-bootstrap"  # the tool's own record is a plain file, never a link
    subprocess.run(["rm", "-r", str(state)], check=True)
    subprocess.run(["cp", "-a", str(built / ".verl-bootstrap"), str(state)], check=True)
    (site,) = dest.glob("lib/python3*/site-packages")
    pointed = []
    for link in [*site.glob("__editable__*"), *site.glob("*.pth")]:
        text = link.read_text(encoding="utf-8")
        if str(built) in text:
            link.unlink()
            link.write_text(text.replace(str(built), str(dest)), encoding="utf-8")
            pointed.append(link.name)
    assert pointed, "verl's editable install names no path to point at the view"
    (dest / "src" / "verl" / (module.replace(".", "/") + ".py")).unlink()
    return dest


def test_train_runs_one_real_sft_step_on_the_node(
    slurm_cluster: SlurmCluster, trainable: Path, tmp_path: Path
) -> None:
    """`cluster verify --train sft` under salloc: the node runs the tool's `verify --train sft`
    in the lab's cpu env (a real verl step, checkpoint and resume), and reports its figures."""
    quick = write_yaml(tmp_path / "quick.yaml", QUICK)
    argv = ["salloc", "-N1", str(TOOL), "cluster", "verify", "--slurm", "--prefix", str(trainable)]
    argv += ["--profile", str(quick), "--train", "sft", "--tool", str(TOOL)]
    done = _run(slurm_cluster, [*argv, "--json"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (node,) = json.loads(done.stdout)["nodes"]
    train = node["train"]
    assert train["ok"] and train["level"] == "sft" and train["route"] == "cpu"
    assert {c["name"]: c["status"] for c in train["checks"]} == {
        "loss": "ok",
        "gradient": "ok",
        "weights changed": "ok",
        "resume": "ok",
    }
    assert train["figures"]["loss"] > 0
    assert train["figures"]["weights"]["changed"] == train["figures"]["weights"]["compared"] > 0
    assert not list(trainable.glob(".verl-bootstrap/train/sft"))  # the node's own scratch, removed


def test_train_names_the_node_whose_env_cannot_train_and_the_part(
    nodes: Path,
    trainable: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """n1 trains in the env; n2's view of it lacks verl's FSDP engine module (its checks and
    fingerprint still pass): the table marks n2's training FAIL, naming the module."""
    base = tmp_path / "nodes"
    base.mkdir()
    (base / "n1").symlink_to(trainable)
    _view_without(trainable, base / "n2", "verl.workers.engine.fsdp.transformer_impl")
    monkeypatch.setenv("VB_BASE", str(base))
    quick = write_yaml(tmp_path / "quick.yaml", QUICK)
    argv = ["cluster", "verify", "--slurm", "--prefix", "$VB_BASE/$SLURMD_NODENAME"]
    argv += ["--submit", "--nodes", "2", "--profile", str(quick), "--train", "sft"]
    assert cli.main([*argv, "--tool", str(TOOL)]) == 1
    text = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("n")}
    assert rows["n1"][1:3] == ["ok", "ok"] and rows["n2"][1:3] == ["FAIL", "FAIL"]
    assert "differences:" not in text  # the same distributions: training alone tells
    assert "  n1: sft ok, cpu, " in text and "weights changed 26/26" in text
    failure = next(line for line in text.splitlines() if line.startswith("  n2: training step"))
    assert "verl.workers.engine.fsdp.transformer_impl" in failure
    assert "No module named 'verl.workers.engine.fsdp.transformer_impl'" in failure
