"""Clusters without Ray: Slurm through srun, the node table, the sbatch script, shared filesystems.

Slurm cannot run here (no slurmctld), so a stand-in `srun` does what `srun --ntasks-per-node=1
--label` does on N nodes: it runs the command once per "node", each with its own environment,
and labels every output line with the task number. Everything it runs is real: the node report
runs in real venvs, one of which has an extra package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from labextras import make_wheel
from slurmfake import FAKE_SRUN

from verl_bootstrap import cli
from verl_bootstrap.cluster.compare import compare
from verl_bootstrap.cluster.nodes import NodeJob, slurm_answers
from verl_bootstrap.cluster.run import Target, local_prefix
from verl_bootstrap.cluster.table import table_text
from verl_bootstrap.commands import uv_binary
from verl_bootstrap.errors import InputError
from verl_bootstrap.host.filesystems import (
    lock_scope,
    mount_of,
    parse_mountinfo,
    read_mounts,
    storage_notes,
)


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two real venvs that differ by one package."""
    base = tmp_path_factory.mktemp("venvs")
    made = []
    for name in ("a", "b"):
        prefix = base / name
        subprocess.run(
            [uv_binary(), "venv", "-q", "--python", sys.executable, str(prefix)], check=True
        )
        made.append(prefix)
    wheel = make_wheel(base)
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(made[1] / "bin" / "python"),
            "--offline",
            "--no-index",
            str(wheel),
        ],
        check=True,
    )
    return made[0], made[1]


@pytest.fixture
def slurm(tmp_path: Path, venvs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    """An allocation of three nodes; node 2 keeps its env elsewhere."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN.format(python=sys.executable))
    srun.chmod(0o755)
    a, b = venvs
    nodes = [{"VB_ENV": str(a), "SLURMD_NODENAME": f"node{i}"} for i in range(3)]
    nodes[2]["VB_ENV"] = str(b)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_NODES", json.dumps(nodes))
    monkeypatch.setenv("FAKE_SRUN_LOG", str(tmp_path / "srun.log"))
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "3")
    monkeypatch.setenv("VB_ENV", str(a))
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path / "srun.log"


def test_slurm_verify_names_the_differing_node_and_each_failed_check(
    slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["cluster", "verify", "--slurm", "--prefix", "$VB_ENV", "--json"])
    body = json.loads(capsys.readouterr().out)
    assert code == 1
    assert json.loads(slurm.read_text().splitlines()[0]) == [
        "--ntasks-per-node=1",
        "--label",
        "--kill-on-bad-exit=0",
        "--nodes=3",
    ]
    assert [n["task"] for n in body["nodes"]] == [0, 1, 2]
    assert body["differences"] == [
        {"node": body["nodes"][2]["label"], "field": "distributions", "detail": "+ tinyextra 0.1"}
    ]
    # these venvs hold no verl: the default checks fail on every node, and say so
    failed = {(f["node"], f["failure"].split(":")[0]) for f in body["failures"]}
    assert (body["nodes"][0]["label"], "import verl") in failed


def test_the_table_marks_the_differing_cell(
    slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        cli.main(["cluster", "verify", "--slurm", "--prefix", "$VB_ENV", "--fingerprint-only"]) == 1
    )
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("node")]
    assert len(rows) == 3 and "≠" in rows[2] and "≠" not in rows[0]
    assert "differences:" in text and "distributions: + tinyextra 0.1" in text


def test_a_node_without_the_env_says_so(
    slurm: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = json.loads(os.environ["FAKE_SLURM_NODES"])
    nodes[1]["VB_ENV"] = str(tmp_path / "missing")
    monkeypatch.setenv("FAKE_SLURM_NODES", json.dumps(nodes))
    assert (
        cli.main(
            ["cluster", "verify", "--slurm", "--prefix", "$VB_ENV", "--json", "--fingerprint-only"]
        )
        == 1
    )
    body = json.loads(capsys.readouterr().out)
    assert {
        "node": body["nodes"][1]["label"],
        "failure": f"no env at {tmp_path / 'missing'}",
    } in body["failures"]


def test_slurm_needs_an_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(InputError, match="SLURM_JOB_ID"):
        slurm_answers(NodeJob(prefix="/p"), dict(os.environ), log_path=Path(os.devnull))


def test_slurm_install_runs_the_command_on_every_node(
    slurm: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = tmp_path / "fake-tool"
    tool.write_text(
        '#!/bin/sh\necho "ran $* on $SLURMD_NODENAME"\n[ "$SLURMD_NODENAME" != node1 ]\n'
    )
    tool.chmod(0o755)
    argv = [
        "cluster",
        "install",
        "--slurm",
        "--prefix",
        "$VB_ENV",
        "--profile",
        "cpu",
        "--lockfile",
        "/labs/cpu.lock.yaml",
        "--tool",
        str(tool),
        "--json",
    ]
    assert cli.main(argv) == 1
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "each-node" and body["lock_scope"]["scope"] == "local"
    assert [n["returncode"] for n in body["nodes"]] == [0, 1, 0]
    a = os.environ["VB_ENV"]
    assert body["nodes"][0]["tail"][0] == (
        f"ran install --profile cpu --prefix {a} --wait 3600 --locked --lockfile "
        "/labs/cpu.lock.yaml on node0"
    )
    assert body["verify"] is None  # a failed install is not verified


def test_cluster_script_emits_a_valid_sbatch_script(tmp_path: Path) -> None:
    target = tmp_path / "verify.sbatch"
    argv = [
        "cluster",
        "script",
        "--slurm",
        "--nodes",
        "4",
        "--prefix",
        "$SLURM_TMPDIR/verl",
        "--profile",
        "fsdp",
        "--tool",
        "/shared/bin/verl-bootstrap",
        "-o",
        str(target),
    ]
    assert cli.main(argv) == 0
    text = target.read_text()
    assert "#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=1\n" in text
    assert text.rstrip().endswith(
        "exec /shared/bin/verl-bootstrap cluster verify --slurm --prefix '$SLURM_TMPDIR/verl' "
        "--profile fsdp"
    )
    assert subprocess.run(["bash", "-n", str(target)], check=False).returncode == 0


def test_target_needs_exactly_one_cluster() -> None:
    with pytest.raises(InputError, match="--ray-address ADDR or --slurm"):
        Target()
    with pytest.raises(InputError):
        Target(ray_address="h:1", slurm=True)


def test_the_prefix_is_expanded_per_node() -> None:
    assert local_prefix("$SCRATCH/verl-${USER}", {"SCRATCH": "/s", "USER": "u"}) == Path(
        "/s/verl-u"
    )
    assert local_prefix("$UNSET/x", {}) == Path("$UNSET/x")


# /proc/self/mountinfo lines in the kernel's format (proc(5)), as NFS and Lustre clients write them.
MOUNTINFO = """\
22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
40 22 0:50 / /home rw,relatime shared:30 - nfs4 fs1:/export/home rw,vers=4.2,local_lock=none
41 22 0:51 / /scratch rw,relatime shared:31 - lustre 10.0.0.9@o2ib:/scratch rw,localflock,lazystatfs
42 22 0:52 / /project rw,relatime shared:32 - lustre 10.0.0.9@o2ib:/project rw,flock,lazystatfs
43 22 0:53 / /old\\040share rw,relatime shared:33 - nfs fs2:/old rw,vers=3,nolock,addr=10.0.0.6
44 40 0:54 / /home/u/fast rw,relatime - xfs /dev/nvme0n1 rw
"""


def test_mount_lines_are_parsed_and_the_deepest_mount_wins() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert [m.fstype for m in mounts] == ["ext4", "nfs4", "lustre", "lustre", "nfs", "xfs"]
    assert mounts[4].mountpoint == "/old share"
    assert mount_of(Path("/home/u/fast/envs/x"), mounts).fstype == "xfs"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "scope"),
    [(1, "cluster"), (2, "node"), (3, "cluster"), (4, "node"), (0, "local"), (5, "local")],
)
def test_the_prefix_lock_scope_per_filesystem(line: int, scope: str) -> None:
    assert lock_scope(parse_mountinfo(MOUNTINFO)[line]).scope == scope


def test_storage_notes_offer_a_node_local_cache_and_warn_about_the_lock(tmp_path: Path) -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    notes = storage_notes(Path("/scratch/u/envs/fsdp"), {"HOME": "/home/u"}, mounts=mounts)
    assert "cannot promise that its prefix lock holds across nodes" in notes[0]
    assert any("UV_CACHE_DIR=/tmp/$USER/uv_cache_dir" in n and "nfs4" in n for n in notes)
    fine = storage_notes(Path("/project/envs/x"), {"HOME": "/home/u/fast"}, mounts=mounts)
    assert fine == [
        "/project/envs/x is on a shared filesystem (lustre; mounted with flock: locks are "
        "cluster-wide): the env is built once, and a run on another node waits for this one "
        "(--wait) and reuses it"
    ]


def test_this_machines_disks_are_local(tmp_path: Path) -> None:
    assert read_mounts(), "this Linux has a /proc/self/mountinfo"
    assert lock_scope(mount_of(tmp_path, read_mounts())).scope == "local"
    assert storage_notes(tmp_path, {"HOME": str(tmp_path)}) == []


def test_compare_uses_the_majority_as_reference() -> None:
    base = {"dists_digest": "a", "distributions": {"x": ["1", "r"]}, "driver": "580.95"}
    odd = {**base, "driver": "570.10", "label": "n3"}
    report = compare([{**base, "label": "n1"}, {**base, "label": "n2"}, odd], {})
    assert [(d.node, d.field, d.detail) for d in report.differences] == [
        ("n3", "driver", "570.10 (others: 580.95)")
    ]
    assert "n3" in table_text(report) and not report.ok


def test_an_env_on_a_shared_filesystem_is_built_once_then_verified_everywhere(
    slurm: Path,
    venvs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shared = (
        f"40 22 0:50 / {venvs[0].parent} rw - nfs4 fs1:/export/envs rw,vers=4.2,local_lock=none"
    )
    monkeypatch.setattr(
        "verl_bootstrap.cluster.run.read_mounts", lambda: parse_mountinfo(MOUNTINFO + shared)
    )
    tool = tmp_path / "fake-tool"
    tool.write_text('#!/bin/sh\necho "ran $* on ${SLURMD_NODENAME:-the login node}"\n')
    tool.chmod(0o755)
    argv = [
        "cluster",
        "install",
        "--slurm",
        "--prefix",
        "$VB_ENV",
        "--profile",
        "cpu",
        "--tool",
        str(tool),
        "--json",
    ]
    assert cli.main(argv) == 1  # these venvs hold no verl: the verification after it fails
    body = json.loads(capsys.readouterr().out)
    assert body["mode"] == "once" and body["lock_scope"]["scope"] == "cluster"
    assert [n["tail"] for n in body["nodes"]] == [
        [f"ran install --profile cpu --prefix {venvs[0]} --wait 3600 on the login node"]
    ]
    assert len(body["verify"]["nodes"]) == 3  # then every node was checked
    assert json.loads(slurm.read_text().splitlines()[-1])[0] == "--ntasks-per-node=1"


def test_the_plan_warns_about_a_shared_prefix_and_a_remote_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lustre = f"41 22 0:51 / {tmp_path} rw - lustre 10.0.0.9@o2ib:/scratch rw,localflock"
    nfs = f"42 22 0:52 / {tmp_path / 'home'} rw - nfs4 fs1:/home rw,vers=4.2"
    mounts = parse_mountinfo("\n".join([MOUNTINFO.splitlines()[0], lustre, nfs]))
    monkeypatch.setattr("verl_bootstrap.host.filesystems.read_mounts", lambda: mounts)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    argv = [
        "plan",
        "--profile",
        "cpu",
        "--prefix",
        str(tmp_path / "envs" / "cpu"),
        "--python",
        sys.executable,
        "--index",
        "pytorch-cpu=https://m.invalid/cpu",
        "--json",
    ]
    assert cli.main(argv) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("cannot promise that its prefix lock holds across nodes" in n for n in notes)
    assert any(f"the cache {tmp_path / 'home' / '.cache' / 'uv'} is on nfs4" in n for n in notes)
