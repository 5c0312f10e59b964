"""Reaching every node of a Slurm allocation: one `srun` task per node, each answer read back.

Inside an allocation (salloc, sbatch: SLURM_JOB_ID is set) the job steps run in it; outside one,
`--submit` lets srun ask Slurm for the nodes itself. What srun prints is read by frames.py.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.lab.cluster.frames import (
    FRAME,
    NODE_LINE,
    TaskOutput,
    lines_of,
    read_answer,
    split_output,
    step_notes,
)
from verl_bootstrap.lab.cluster.nodes import NodeJob
from verl_bootstrap.paths import PROBES
from verl_bootstrap.redact import redact_args
from verl_bootstrap.safety.shellquote import sbatch_value

__all__ = ["SlurmOptions", "read_answers", "slurm_answers", "srun_argv"]

_RC_MARK = f"{FRAME} exit "
# A framed answer's numbered base64 part, as srun labels it.
_PART_LINE = re.compile(rf"^\s*\d+: ?{FRAME} \d+ ")
# Each task first says which node Slurm runs it on: a task that dies still has a name.
_HELLO = f'printf "%s\\n" "{NODE_LINE}${{SLURMD_NODENAME:-$(hostname)}}"; '
# Runs on each node: the prefix expanded there, then the report in the node's python3 (on PATH,
# else /usr/bin's; 3.8+, isolated), never one inside the env (as named, through its folder's
# links or its own): the report finds the env the user's (probes/envowner.py) before anything of
# the env runs, and an interpreter inside it would be the env's own code running first.
_NODE_SH = _HELLO + (
    'p=$(eval "printf %s \\"$1\\""); r=$(cd -P -- "$p" 2>/dev/null && pwd -P) || r=$p\n'
    'inside() { case "$1/" in "$p"/*|"$r"/*) return 0;; esac; return 1; }\n'
    'for py in "$(command -v python3)" /usr/bin/python3; do\n'
    '  [ -n "$py" ] || continue\n'
    '  d=$(cd -P -- "${py%/*}" 2>/dev/null && pwd -P); f=$(readlink -f -- "$py" 2>/dev/null)\n'
    '  inside "$py" || inside "$d/" || inside "$f" && continue\n'
    '  "$py" -I -c "import sys; sys.exit(sys.version_info < (3, 8))" 2>/dev/null || continue\n'
    '  exec "$py" -I -c "$2" "$3"\n'
    "done\n"
    'echo "no Python 3.8+ on this node outside the env to check it with (python3 on PATH, '
    '/usr/bin/python3): nothing of the env runs before it is found yours"; exit 1'
)
# Runs a command on each node, its arguments' variables expanded there, then reports its exit.
_COMMAND_SH = _HELLO + (
    'n=$#; while [ "$n" -gt 0 ]; do a=$1; shift; set -- "$@" "$(eval "printf %s \\"$a\\"")"; '
    f'n=$((n - 1)); done; "$@"; rc=$?; echo; echo "{_RC_MARK}$rc"'
)


@dataclass(frozen=True)
class SlurmOptions:
    """What a Slurm user passes through to the job steps (and to a job `--submit` asks for)."""

    nodes: int | None = None  # default: every node of the allocation
    time: str | None = None  # the steps' time limit, as srun reads it (10, 01:00:00, 1-0)
    partition: str | None = None
    submit: bool = False  # outside an allocation: srun asks Slurm for the nodes itself

    def __post_init__(self) -> None:
        if self.time:
            sbatch_value(self.time, "--time")
        if self.partition:
            sbatch_value(self.partition, "--partition")


def srun_argv(job: NodeJob, options: SlurmOptions, *, nodes: int | None) -> list[str]:
    """`srun` running the job once on each of `nodes` nodes (unlabelled output is srun's own)."""
    argv = ["srun", "--ntasks-per-node=1", "--label", "--kill-on-bad-exit=0"]
    if nodes:
        argv += [f"--nodes={nodes}", f"--ntasks={nodes}"]
    if options.time:
        argv.append(f"--time={options.time}")
    if options.partition:
        argv.append(f"--partition={options.partition}")
    if options.submit:
        argv.append("--job-name=verl-bootstrap-cluster")
    if job.command:
        return [*argv, "sh", "-c", _COMMAND_SH, "sh", *job.command]
    source = (PROBES / "node_report.py").read_text(encoding="utf-8")
    return [*argv, "sh", "-c", _NODE_SH, "sh", job.prefix, source, json.dumps(job.report_args())]


def _node_count(options: SlurmOptions, environ: Mapping[str, str]) -> int | None:
    """The nodes to run on: --nodes, else the allocation's; an InputError outside one."""
    if environ.get("SLURM_JOB_ID"):
        allocated = environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or ""
        return options.nodes or (int(allocated) if allocated.isdigit() else None)
    if not options.submit:
        raise InputError(
            "--slurm runs in a Slurm allocation, and this shell has none (SLURM_JOB_ID is unset)",
            hint="get one: `salloc -N 2 verl-bootstrap cluster verify --slurm --prefix P`; or "
            "add `--submit --nodes 2` and srun asks Slurm for the nodes; "
            "`verl-bootstrap cluster script --slurm` writes an sbatch script",
        )
    if not options.nodes:
        raise InputError("--submit needs --nodes N", hint="e.g. --submit --nodes 2")
    return options.nodes


def slurm_answers(
    job: NodeJob, environ: Mapping[str, str], *, options: SlurmOptions, log_path: Path
) -> list[dict[str, Any]]:
    """One answer per node: its report (or command's exit), or an error saying what went wrong."""
    nodes = _node_count(options, environ)
    if shutil.which("srun", path=environ.get("PATH")) is None:
        raise InputError(
            "--slurm runs its job steps with srun, and srun is not on PATH",
            hint="run it where Slurm's commands are (a login node; `module load slurm` on some "
            "clusters), or use --ray-address for a Ray cluster",
        )
    argv = srun_argv(job, options, nodes=nodes)
    # Not streamed to the log: the framed parts are base64, which no redaction can read.
    done = proc.run(argv, check=False, keep_output=True)
    answers = read_answers(done.output, job, nodes=nodes)
    _log_readable(log_path, argv, done.output, answers)
    if answers is None:
        raise StepFailed(
            f"srun ran no task (exit {done.returncode}): {' | '.join(done.tail[-3:])}",
            hint=f"check the allocation (`squeue --me`) and the options; the output is in "
            f"{log_path}",
        )
    return answers


def _log_readable(
    log_path: Path, argv: list[str], output: str, answers: list[dict[str, Any]] | None
) -> None:
    """The run's log as a person reads it: srun's lines less the framed parts, then each
    node's decoded answer (masked when it was read, as every logged line is)."""
    kept = [ln for ln in lines_of(output) if not _PART_LINE.match(ln)]
    decoded = [json.dumps(a, sort_keys=True) for a in answers or []]
    with log_path.open("a", encoding="utf-8") as log:
        # srun's options; the node script and its arguments after them are ours, and long
        log.write(f"$ {shlex.join(redact_args(argv[: argv.index('sh')]))} sh -c ...\n")
        log.writelines(f"{line}\n" for line in [*kept, *decoded])


def read_answers(output: str, job: NodeJob, *, nodes: int | None) -> list[dict[str, Any]] | None:
    """Each task's answer in what srun printed (a task that said nothing is an error too);
    None when no task printed anything (srun itself failed)."""
    tasks = split_output(output, nodes)
    if not any(t.lines for t in tasks.values()):
        return None
    numbers = sorted({*range(nodes or 0), *tasks})
    step = tuple(step_notes(output))
    return [_answer(tasks.get(n) or TaskOutput(n), job, step) for n in numbers]


def _answer(task: TaskOutput, job: NodeJob, step: tuple[str, ...]) -> dict[str, Any]:
    """The task's answer; srun's notes on it, else on the whole step, say why it has none."""
    base: dict[str, Any] = {"task": task.task}
    if task.node:
        base["node_name"] = task.node
    said = [ln for ln in task.lines if not ln.startswith(FRAME)]
    notes = task.notes or step
    if job.command:
        code = _rc(task)
        while said and not said[-1]:  # the line break written before the exit line
            said.pop()
        tail = [*said, *(f"srun: {note}" for note in (notes if code < 0 else ()))]
        return {**base, "returncode": code, "tail": tail[-30:]}
    answer = read_answer(task.lines)
    if isinstance(answer, dict):
        return {**answer, **base}
    return {**base, "error": _why(answer, task.task, notes, said)}


def _why(reason: str, task: int, notes: tuple[str, ...], said: list[str]) -> str:
    """A node's error: why its answer is unreadable, srun's word on it, its last lines."""
    parts = [f"task {task}: {reason}"]
    if notes:
        parts.append("srun: " + "; ".join(notes))
    shown = [line[:200] for line in said if line.strip()][-3:]
    if shown:
        parts.append("last lines: " + " | ".join(shown))
    return "; ".join(parts)


def _rc(task: TaskOutput) -> int:
    """The command's exit, as the task reported it; -1 when it died before it could."""
    for line in reversed(task.lines):
        if line.startswith(_RC_MARK) and line[len(_RC_MARK) :].strip().isdigit():
            return int(line[len(_RC_MARK) :])
    return -1
