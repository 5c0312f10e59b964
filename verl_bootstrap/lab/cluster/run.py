"""`cluster verify` and `cluster install`: every node checked against the others.

verify: the node report on every node (a Ray task pinned to each, or srun), then compare.
install: the locked install on every node, for clusters without a shared filesystem; an env on a
shared filesystem is built once, from this node, and then verified everywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError
from verl_bootstrap.lab.cluster.compare import ClusterReport, compare
from verl_bootstrap.lab.cluster.nodes import NodeJob, ray_answers
from verl_bootstrap.lab.cluster.srun import SlurmOptions, slurm_answers
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.machine.host.filesystems import LockScope, lock_scope, mount_of, read_mounts
from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.run.state.ownership import check_yours

__all__ = [
    "ClusterInstall",
    "Target",
    "TrainOnNodes",
    "install_cluster",
    "install_mode",
    "local_prefix",
    "verify_cluster",
]

_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
# a node's whole `verify --train`: its checks, then two runs of the level, each stopped by
# verify/train.py past 15 (SFT) or 30 (RL) minutes; this limit only catches what hangs beyond
_TRAIN_LIMIT_S = {"sft": 2400.0, "rl": 4200.0}


@dataclass(frozen=True)
class Target:
    """How to reach the nodes: a Ray address, or Slurm (the current allocation, or one srun
    asks for with --submit)."""

    ray_address: str | None = None
    slurm: bool = False
    ray_python: Path | None = None  # a Python with the cluster's Ray (default: the env's)
    slurm_options: SlurmOptions = field(default_factory=SlurmOptions)

    def __post_init__(self) -> None:
        if bool(self.ray_address) == self.slurm:
            raise InputError(
                "name the cluster: --ray-address ADDR or --slurm (one of them)",
                hint="e.g. --ray-address 10.0.0.1:6379, or --slurm inside an allocation",
            )


def local_prefix(template: str, environ: Mapping[str, str] | None = None) -> Path:
    """The prefix as this node sees it (variables in it are expanded on each node)."""
    return Path(_expand(template, dict(os.environ if environ is None else environ))).expanduser()


def _expand(text: str, environ: Mapping[str, str]) -> str:
    """`text` with the variables this node has filled in (others are left as written)."""
    return _VARIABLE.sub(lambda found: environ.get(found[1] or found[2], found[0]), text)


def _local_env(prefix: str, environ: Mapping[str, str]) -> Path:
    """The env as this node sees it, for what the tool reads or runs of it here (its lockfile, its
    python as Ray's driver): refused (exit 3) unless it is the user's (run/state/ownership.py), as
    each node's report refuses its own."""
    local = local_prefix(prefix, environ)
    check_yours(local, command="cluster")
    return local


def _spec(prefix: str, profile: str | None, environ: Mapping[str, str]) -> VerifySpec:
    """The checks of --profile, else of the profile that built the env, else the defaults."""

    if profile:
        return load_profile(profile).verify
    lock = env_lockfile(_local_env(prefix, environ))
    return load_profile(read_lockfile(lock).profile).verify if lock.is_file() else VerifySpec()


def _request(spec: VerifySpec, *, fingerprint_only: bool) -> dict[str, Any]:
    if fingerprint_only:  # torch alone loads the CUDA libraries the fingerprint lists
        return {"imports": ["torch"], "versions": [], "gpu_smoke": False}
    return {
        "imports": list(spec.imports),
        "versions": sorted(spec.versions),
        "gpu_smoke": spec.gpu_smoke,
        "bf16": spec.bf16,
        "flash_attn": spec.flash_attn,
    }


def _label(answer: Mapping[str, Any]) -> str:
    name = answer.get("node_name") or answer.get("host") or f"task {answer.get('task', '?')}"
    node_id = str(answer.get("node_id") or "")
    return f"{name}/{node_id[:8]}" if node_id else str(name)


def _answers(
    target: Target, job: NodeJob, *, log_path: Path, environ: Mapping[str, str]
) -> list[dict[str, Any]]:
    if target.slurm:
        return slurm_answers(job, environ, options=target.slurm_options, log_path=log_path)
    python = target.ray_python or _local_env(job.prefix, environ) / "bin" / "python"
    return ray_answers(python, str(target.ray_address), job, log_path=log_path)


@dataclass(frozen=True)
class TrainOnNodes:
    """`cluster verify --train LEVEL`: the tool (its path on the nodes) runs the level there."""

    level: str
    tool: str

    def request(self, prefix: str, profile: str | None) -> dict[str, Any]:
        """What the node report runs: `verify --train LEVEL --json`, and its time limit."""
        command = [self.tool, "verify", "--prefix", prefix, "--train", self.level, "--json"]
        command += ["--profile", profile] if profile else []
        return {"command": command, "level": self.level, "timeout": _TRAIN_LIMIT_S[self.level]}


def verify_cluster(
    target: Target,
    prefix: str,
    *,
    profile: str | None,
    fingerprint_only: bool,
    log_path: Path,
    environ: Mapping[str, str] | None = None,
    train: TrainOnNodes | None = None,
) -> ClusterReport:
    """The node report from every node, compared: every difference and failure named."""
    env = dict(os.environ if environ is None else environ)
    spec = _spec(prefix, profile, env)
    job = NodeJob(
        prefix=prefix,
        request=_request(spec, fingerprint_only=fingerprint_only),
        train=train.request(prefix, profile) if train else None,
    )
    answers = _answers(target, job, log_path=log_path, environ=env)
    versions = {} if fingerprint_only else dict(spec.versions)
    return compare(answers, versions, namer=_label)


@dataclass(frozen=True)
class ClusterInstall:
    """What `cluster install` did on each node, and the verification after it."""

    mode: str  # "once" (a shared filesystem: built from this node) or "each-node"
    scope: LockScope
    results: tuple[Mapping[str, Any], ...]  # per node: label, returncode, tail
    verify: ClusterReport | None

    @property
    def ok(self) -> bool:
        """Every install succeeded and the nodes match."""
        installed = all(r.get("returncode") == 0 for r in self.results)
        return installed and self.verify is not None and self.verify.ok


def install_mode(prefix: str, environ: Mapping[str, str]) -> tuple[str, LockScope]:
    """ "once" (the prefix is on a shared filesystem: one build from this node, the others see
    it) or "each-node" (a local disk: every node builds its own), and the prefix's lock scope."""
    scope = lock_scope(mount_of(local_prefix(prefix, dict(environ)), read_mounts()))
    return ("once" if scope.scope != "local" else "each-node"), scope


def install_cluster(
    target: Target,
    prefix: str,
    command: Sequence[str],
    *,
    log_path: Path,
    environ: Mapping[str, str] | None = None,
) -> ClusterInstall:
    """The install on every node (once, from here, when the prefix is on a shared filesystem)."""
    env = dict(os.environ if environ is None else environ)
    mode, scope = install_mode(prefix, env)
    if mode == "once":  # one build, from here; the other nodes see it
        argv = [str(_expand(arg, env)) for arg in command]
        done = proc.run(argv, log_path=log_path, check=False)
        results: list[Mapping[str, Any]] = [
            {"label": "this node", "returncode": done.returncode, "tail": list(done.tail)}
        ]
    else:
        job = NodeJob(prefix=prefix, command=tuple(command))
        answers = _answers(target, job, log_path=log_path, environ=env)
        results = [{**a, "label": _label(a)} for a in answers]
    ok = bool(results) and all(r.get("returncode") == 0 for r in results)
    verify = (
        verify_cluster(
            target, prefix, profile=None, fingerprint_only=False, log_path=log_path, environ=env
        )
        if ok
        else None
    )
    return ClusterInstall(mode, scope, tuple(results), verify)
