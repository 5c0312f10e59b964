"""Reaching every node: a Ray task pinned to each node, or one srun task per node under Slurm.

Both run the same stdlib-only node report (sent as source) or the same command line, and hand
back one answer per node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.paths import PROBES

__all__ = ["NodeJob", "ray_answers", "slurm_answers", "srun_argv"]

_RAY_MARK = "@@RAY@@"
_NODE_MARK = "@@NODE@@"
_RC_MARK = "@@RC@@"
_LABEL = re.compile(r"^\s*(?P<task>\d+):\s?(?P<line>.*)$")
# Runs on each node: the prefix expanded there; its interpreter, else any python3.
_NODE_SH = (
    'p=$(eval "printf %s \\"$1\\""); py="$p/bin/python"; [ -x "$py" ] || py=python3; '
    'exec "$py" -c "$2" "$3"'
)
# Runs a command on each node, its arguments' variables expanded there, then reports its exit.
_COMMAND_SH = (
    'n=$#; while [ "$n" -gt 0 ]; do a=$1; shift; set -- "$@" "$(eval "printf %s \\"$a\\"")"; '
    'n=$((n - 1)); done; "$@"; rc=$?; echo; echo "@@RC@@$rc"'
)


@dataclass(frozen=True)
class NodeJob:
    """What runs on each node: the node report of `prefix`, or a command."""

    prefix: str
    request: Mapping[str, Any] = field(default_factory=dict)  # for the verify probe
    command: tuple[str, ...] = ()  # set: run this instead of the report
    timeout: float = 900.0

    def report_args(self) -> dict[str, Any]:
        """The node report's keyword arguments."""
        verify = (PROBES / "verify_env.py").read_text(encoding="utf-8")
        return {
            "prefix": self.prefix,
            "verify_source": verify,
            "request": dict(self.request),
            "timeout": self.timeout,
        }


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
        "timeout": job.timeout,
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


def srun_argv(job: NodeJob, *, nodes: int | None = None) -> list[str]:
    """`srun --ntasks-per-node=1` running the job once on every node of the allocation."""
    argv = ["srun", "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0"]
    if nodes:
        argv.append(f"--nodes={nodes}")
    if job.command:
        return [*argv, "sh", "-c", _COMMAND_SH, "sh", *job.command]
    source = (PROBES / "node_report.py").read_text(encoding="utf-8")
    return [*argv, "sh", "-c", _NODE_SH, "sh", job.prefix, source, json.dumps(job.report_args())]


def _by_task(output: str) -> dict[int, list[str]]:
    tasks: dict[int, list[str]] = {}
    for line in output.splitlines():
        found = _LABEL.match(line)
        if found:
            tasks.setdefault(int(found["task"]), []).append(found["line"])
    return tasks


def slurm_answers(
    job: NodeJob, environ: Mapping[str, str], *, log_path: Path
) -> list[dict[str, Any]]:
    """One answer per node of the current Slurm allocation."""
    if not environ.get("SLURM_JOB_ID"):
        raise InputError(
            "--slurm runs inside a Slurm allocation, and SLURM_JOB_ID is not set",
            hint="run it under salloc or sbatch; `verl-bootstrap cluster script --slurm` "
            "writes the sbatch script",
        )
    nodes = int(environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or 0)
    done = proc.run(
        srun_argv(job, nodes=nodes or None), log_path=log_path, check=False, keep_output=True
    )
    return [_task_answer(task, lines, job) for task, lines in sorted(_by_task(done.output).items())]


def _task_answer(task: int, lines: Sequence[str], job: NodeJob) -> dict[str, Any]:
    text = "\n".join(lines)
    if job.command:
        code = _rc(lines)
        body = [ln for ln in lines if not ln.startswith(_RC_MARK)]
        return {"task": task, "returncode": code, "tail": body[-30:]}
    answer = proc.marked(text, _NODE_MARK)
    if answer is None:
        return {"task": task, "error": "no answer: " + " | ".join(lines[-3:])}
    return {"task": task, **answer}


def _rc(lines: Sequence[str]) -> int:
    for line in reversed(lines):
        if line.startswith(_RC_MARK):
            return int(line[len(_RC_MARK) :])
    return -1
