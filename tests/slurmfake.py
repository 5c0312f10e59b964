"""A stand-in for `srun --ntasks-per-node=1 --label` (Slurm cannot run here): it runs the command
once per "node" listed in $FAKE_SLURM_NODES, each with its own environment, and labels every
output line with the task number."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

FAKE_SRUN = '''#!{python}
"""Stand-in for srun --ntasks-per-node=1 --label: one task per node, each line labelled."""
import json, os, subprocess, sys
args = sys.argv[1:]
flags = []
while args and args[0].startswith("--"):
    flags.append(args.pop(0))
with open(os.environ["FAKE_SRUN_LOG"], "a") as log:
    log.write(json.dumps(flags) + "\\n")
for task, extra in enumerate(json.loads(os.environ["FAKE_SLURM_NODES"])):
    env = dict(os.environ, **extra, SLURM_NODEID=str(task), SLURM_PROCID=str(task))
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    for line in (done.stdout + done.stderr).splitlines():
        print(f"{{task}}: {{line}}")
'''


def fake_allocation(folder: Path, nodes: list[dict[str, str]], patch: pytest.MonkeyPatch) -> Path:
    """An allocation of `nodes` (each: the variables that node's task sees), served by the
    stand-in srun put first on PATH; the file it logs its flags to."""
    folder.mkdir(parents=True, exist_ok=True)
    srun = folder / "srun"
    srun.write_text(FAKE_SRUN.format(python=sys.executable))
    srun.chmod(0o755)
    patch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    patch.setenv("FAKE_SLURM_NODES", json.dumps(nodes))
    patch.setenv("FAKE_SRUN_LOG", str(folder / "srun.log"))
    patch.setenv("SLURM_JOB_ID", "4242")
    patch.setenv("SLURM_JOB_NUM_NODES", str(len(nodes)))
    return folder / "srun.log"
