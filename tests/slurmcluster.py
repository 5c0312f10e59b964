"""A real Slurm for the cluster tests: munged, slurmctld and three slurmd, all on this host.

Debian's slurm-wlm and munge (`make test-deps` installs them where it runs as root with apt-get).
Slurm runs several slurmd on one host when each has its own node name and port (NodeHostname is
this host): three nodes, n1 to n3, so a difference between nodes is a real Slurm's doing. All of
it is private to the session: its own munge socket and key, its own config (SLURM_CONF), free
ports, state and logs under the session's temporary folder, so it collides with nothing else on
the machine. The daemons run in the foreground as this process's children and are stopped by
their process ids at the end.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["NODES", "SlurmCluster", "running_slurm", "slurm_or_fail"]

NODES = ("n1", "n2", "n3")
_SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
_TOOLS = ("munged", "slurmctld", "slurmd", "srun", "salloc", "sbatch", "sinfo")
_UP_SECONDS = 60


@dataclass(frozen=True)
class SlurmCluster:
    """A running cluster: its config (for SLURM_CONF) and folder."""

    conf: Path
    folder: Path

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (default: this process's environment) pointed at the cluster, and outside any
        allocation."""
        env = {k: v for k, v in (base or os.environ).items() if not k.startswith("SLURM_")}
        return {**env, "SLURM_CONF": str(self.conf), "PATH": _SBIN}


def slurm_or_fail() -> None:
    """Fail, saying how to fix it, where the real Slurm cannot run: only a missing GPU skips a
    test, and CI (root, apt-get) always has what `make test-deps` installs."""
    missing = [tool for tool in _TOOLS if shutil.which(tool, path=_SBIN) is None]
    if missing:
        pytest.fail(
            f"Slurm is not installed ({', '.join(missing)}): run `make test-deps` as root "
            "(it installs slurm-wlm and munge with apt-get)"
        )
    if os.geteuid() != 0:
        pytest.fail("slurmd runs jobs as their users only when it runs as root: run as root")


def _free_ports(count: int) -> list[int]:
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _config(folder: Path, host: str, ports: list[int]) -> str:
    lines = [
        "ClusterName=vbtest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder / 'munge.sock'}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool' / '%n'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd-%n.pid'}",
        "ProctrackType=proctrack/linuxproc",  # no cgroups in a container
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        "InactiveLimit=0",
        "KillWait=2",
    ]
    for name, port in zip(NODES, ports[1:], strict=True):
        lines.append(
            f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} "
            "CPUs=1 RealMemory=1000"
        )
    lines.append(f"PartitionName=debug Nodes={','.join(NODES)} Default=YES State=UP")
    return "\n".join(lines) + "\n"


def _daemon(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)


def _wait_idle(cluster: SlurmCluster, logs: list[Path]) -> None:
    """Until sinfo shows every node idle; else fail with the daemons' last words."""
    deadline = time.monotonic() + _UP_SECONDS
    states: list[str] = []
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"],
            env=cluster.environ(),
            capture_output=True,
            text=True,
            check=False,
        )
        states = done.stdout.split()
        if done.returncode == 0 and states.count("idle") == len(NODES):
            return
        time.sleep(0.3)
    tails = "\n".join(f"{log.name}: {log.read_text()[-600:]}" for log in logs if log.exists())
    pytest.fail(f"the Slurm nodes did not come up idle ({states}):\n{tails}")


@contextmanager
def running_slurm(folder: Path) -> Iterator[SlurmCluster]:
    """munged, slurmctld and one slurmd per node, up and idle; stopped afterwards."""
    slurm_or_fail()
    for sub in ("state", "spool", "log"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    host = socket.gethostname().split(".")[0]
    (folder / "slurm.conf").write_text(_config(folder, host, _free_ports(1 + len(NODES))))
    (folder / "cgroup.conf").write_text("CgroupAutomount=no\n")
    cluster = SlurmCluster(conf=folder / "slurm.conf", folder=folder)
    env, log = cluster.environ(), folder / "log"
    munged = [
        f"--socket={folder / 'munge.sock'}",
        f"--key-file={key}",
        f"--seed-file={folder}/seed",
    ]
    munged += [f"--pid-file={folder / 'munged.pid'}", f"--log-file={log / 'munged.log'}"]
    daemons = [_daemon(["munged", "--foreground", "--force", *munged], log / "munged.out", env)]
    try:
        _wait_for(folder / "munge.sock")
        daemons.append(_daemon(["slurmctld", "-D", "-i"], log / "slurmctld.log", env))
        daemons += [_daemon(["slurmd", "-D", "-N", n], log / f"slurmd-{n}.log", env) for n in NODES]
        _wait_idle(cluster, sorted(log.iterdir()))
        yield cluster
    finally:
        _stop(daemons)


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + _UP_SECONDS
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def _stop(daemons: list[subprocess.Popen[bytes]]) -> None:
    """Each daemon by its process id, the slurmds first (they hold the job steps), munged last."""
    for daemon in reversed(daemons):
        daemon.terminate()
        try:
            daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
