"""What runs on every node (the node report, or a command), and reaching the nodes through Ray.

Ray pins a task to each node; Slurm runs one srun task per node (srun.py). Both run the same
stdlib-only node report (sent as source, with the ownership rule it applies first) or the same
command line, and hand back one answer per node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.paths import PROBES

__all__ = ["NodeJob", "ray_answers"]

_RAY_MARK = "@@RAY@@"


@dataclass(frozen=True)
class NodeJob:
    """What runs on each node: the node report of `prefix`, or a command."""

    prefix: str
    request: Mapping[str, Any] = field(default_factory=dict)  # for the verify probe
    command: tuple[str, ...] = ()  # set: run this instead of the report
    timeout: float = 900.0
    train: Mapping[str, Any] | None = None  # `verify --train`'s command and limit, run after it

    def report_args(self) -> dict[str, Any]:
        """The node report's keyword arguments: with the verify probe, the ownership rule that
        the node applies before it runs anything of the env (probes/envowner.py)."""
        verify = (PROBES / "verify_env.py").read_text(encoding="utf-8")
        args = {
            "prefix": self.prefix,
            "verify_source": verify,
            "rule_source": (PROBES / "envowner.py").read_text(encoding="utf-8"),
            "request": dict(self.request),
            "timeout": self.timeout,
        }
        return {**args, "train": dict(self.train)} if self.train else args

    def limit(self) -> float:
        """How long a node's whole answer may take: the report, then the training level."""
        return self.timeout + (float(self.train["timeout"]) if self.train else 0.0)


def ray_answers(
    python: Path, address: str, job: NodeJob, *, log_path: Path
) -> list[dict[str, Any]]:
    """One answer per alive node of the Ray cluster at `address`."""
    if not python.exists():
        raise InputError(
            f"no Python at {python} to reach the Ray cluster from",
            hint="pass --ray-python with a Python that has the cluster's Ray version",
        )
    request = {
        "address": address,
        "action": "command" if job.command else "report",
        "command": list(job.command),
        "timeout": job.limit(),
        "node_source": (PROBES / "node_report.py").read_text(encoding="utf-8"),
        "args": {} if job.command else job.report_args(),
    }
    argv = [str(python), str(PROBES / "ray_nodes.py"), json.dumps(request)]
    done = proc.run(argv, log_path=log_path, check=False, keep_output=True)
    answers = proc.marked(done.output, _RAY_MARK)
    if answers is None:
        raise StepFailed(
            f"could not run a task on each node of the Ray cluster at {address} "
            f"(exit {done.returncode}): {' | '.join(done.tail[-3:])}",
            hint=f"check the address (`ray status`) and that {python} has the cluster's Ray; "
            f"the full output is in {log_path}",
        )
    return list(answers)
