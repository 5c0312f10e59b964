"""Clusters, the parts no cluster needs to show: the node table and the comparison, the sbatch
script's text, the target's flags, shared filesystems. On a real Slurm: test_cluster_slurm.py;
on a real Ray: test_cluster_ray.py; srun's output read back: test_cluster_frames.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from verl_bootstrap import cli
from verl_bootstrap.errors import InputError
from verl_bootstrap.lab.cluster.compare import compare
from verl_bootstrap.lab.cluster.run import Target, local_prefix
from verl_bootstrap.lab.cluster.table import table_text
from verl_bootstrap.machine.host.filesystems import (
    lock_scope,
    mount_of,
    parse_mountinfo,
    read_mounts,
    storage_notes,
)
from verl_bootstrap.paths import PROBES


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


def test_cluster_script_passes_train_to_every_nodes_verify(tmp_path: Path) -> None:
    target = tmp_path / "train.sbatch"
    argv = ["cluster", "script", "--slurm", "--nodes", "2", "--prefix", "/shared/envs/rl"]
    assert cli.main([*argv, "--train", "sft", "-o", str(target)]) == 0
    assert (
        target.read_text()
        .rstrip()
        .endswith("cluster verify --slurm --prefix /shared/envs/rl --train sft")
    )
    assert subprocess.run(["bash", "-n", str(target)], check=False).returncode == 0


def test_cluster_script_refuses_train_with_the_install_action(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "install.sbatch"
    argv = ["cluster", "script", "--slurm", "--nodes", "2", "--prefix", "/shared/envs/rl"]
    code = cli.main([*argv, "--action", "install", "--train", "rl", "-o", str(target)])
    assert code == 2
    assert "--train goes with --action verify" in capsys.readouterr().err
    assert not target.exists()


def test_target_needs_exactly_one_cluster() -> None:
    with pytest.raises(InputError, match="--ray-address ADDR or --slurm"):
        Target()
    with pytest.raises(InputError):
        Target(ray_address="h:1", slurm=True)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--ray-address", "h:1", "--time", "10"], "--time: Slurm's options, and --slurm is not"),
        (["--slurm", "--time", "1 0"], "--time '1 0' cannot go on a #SBATCH line"),
        (["--slurm", "--partition", "a;b"], "--partition 'a;b' cannot go on a #SBATCH line"),
        (["--slurm", "--nodes", "0"], "0: one node or more"),
    ],
)
def test_slurms_options_are_checked_before_any_node_is_asked(
    extra: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["cluster", "verify", "--prefix", "/p", *extra]) == 2
    assert said in capsys.readouterr().err


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
    assert any("UV_CACHE_DIR=$(mktemp -d)" in n and "nfs4" in n for n in notes)
    assert not any("/tmp/$USER" in n for n in notes)  # a fixed shared name it would refuse
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


def test_the_plan_warns_about_a_shared_prefix_and_a_remote_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lustre = f"41 22 0:51 / {tmp_path} rw - lustre 10.0.0.9@o2ib:/scratch rw,localflock"
    nfs = f"42 22 0:52 / {tmp_path / 'home'} rw - nfs4 fs1:/home rw,vers=4.2"
    mounts = parse_mountinfo("\n".join([MOUNTINFO.splitlines()[0], lustre, nfs]))
    monkeypatch.setattr("verl_bootstrap.machine.host.filesystems.read_mounts", lambda: mounts)
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


def _trained(level: str, *, ok: bool, failed: str = "") -> dict[str, object]:
    checks = [{"name": "loss", "status": "ok", "detail": "loss 5.656"}]
    if failed:
        checks.append({"name": f"{level} step", "status": "fail", "detail": failed})
    figures = {"loss": 5.656, "weights": {"changed": 26, "compared": 26}} if ok else {}
    return {
        "level": level,
        "route": "cpu",
        "ok": ok,
        "seconds": 80.4,
        "figures": figures,
        "checks": checks,
    }


def test_the_table_shows_each_nodes_training_step_and_names_the_failing_part() -> None:
    """The shape `cluster verify --train` answers with (the real run: test_cluster_slurm.py)."""
    why = "verl.workers.engine.fsdp.transformer_impl do not import: No module named 'peft'"
    answers = [
        {"host": "n1", "train": _trained("sft", ok=True)},
        {"host": "n2", "train": _trained("sft", ok=False, failed=why)},
        {"host": "n3", "train": {"level": "sft", "ok": False, "error": "verify --train exited 2"}},
    ]
    report = compare(answers, {})
    assert [f for _, f in report.failures] == [
        f"training step (sft): sft step: {why}",
        "training step (sft): verify --train exited 2",
    ]
    text = table_text(report)
    rows = {line.split()[0]: line.split()[:3] for line in text.splitlines() if line[:1] == "n"}
    assert rows == {
        "n1": ["n1", "ok", "ok"],
        "n2": ["n2", "FAIL", "FAIL"],
        "n3": ["n3", "FAIL", "FAIL"],
    }
    assert "  n1: sft ok, cpu, 80 s, loss 5.656, weights changed 26/26, log-prob max diff -" in text
    assert "  n2: sft FAIL, cpu: sft step failed" in text
    assert "  n3: FAIL, verify --train exited 2" in text


def test_the_verdict_of_one_node_says_pass_not_match() -> None:
    base = {"dists_digest": "a", "distributions": {"x": ["1", "r"]}, "driver": "580.95"}
    assert table_text(compare([{**base, "label": "n1"}], {})).endswith("\nthe 1 node passes")
    failed = {**base, "label": "n1", "error": "no env at /p"}
    assert table_text(compare([failed], {})).endswith("\nthe 1 node does NOT pass")
    two = compare([{**base, "label": "n1"}, {**base, "label": "n2"}], {})
    assert table_text(two).endswith("\nall 2 nodes match and pass")


def test_without_train_the_table_has_no_train_column() -> None:
    text = table_text(compare([{"host": "n1"}], {}))
    assert text.splitlines()[0].split()[:3] == ["NODE", "CHECKS", "LOCK"]


def test_the_node_runs_the_tools_verify_train_and_reads_its_error(tmp_path: Path) -> None:
    """A real child process for the tool: one that refuses, as a bad --prefix makes it."""
    namespace: dict[str, object] = {"__name__": "node_report"}
    exec(compile((PROBES / "node_report.py").read_text(), "node_report.py", "exec"), namespace)
    tool = tmp_path / "tool"
    tool.write_text(
        '#!/bin/sh\necho "{\\"ok\\": false, \\"error\\": {}}"\n'
        'echo "error: verify: --prefix $3 is not a folder" >&2\nexit 2\n'
    )
    tool.chmod(0o755)
    train = {"command": [str(tool), "verify", "--prefix", "$HOME/x"], "level": "rl", "timeout": 60}
    run_train = namespace["run_train"]
    assert callable(run_train)
    answer = run_train(train)
    home = Path.home()
    assert answer == {
        "ok": False,
        "level": "rl",
        "error": f"verify --train exited 2: error: verify: --prefix {home}/x is not a folder",
    }
