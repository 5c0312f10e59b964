"""Runs in a Python that has Ray (the env's own, by default): one task pinned to each alive node.

Ray's own engine, no home-made runner: the driver connects to the running cluster, schedules one
zero-CPU task on every alive node with a hard NodeAffinitySchedulingStrategy, and collects what
each returns. A task either runs the node report (its source is shipped along, so nothing needs
to be installed on the nodes) or runs a command there (`cluster install`).
Usage: python ray_nodes.py '<json request>'   (prints one JSON line after @@RAY@@)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MARK = "@@RAY@@"
_TAIL = 30


def on_node(request):
    """The task body (defined in __main__, so Ray ships it by value)."""
    if request["action"] == "command":
        argv = [str(Path(os.path.expandvars(a)).expanduser()) for a in request["command"]]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=request["timeout"], check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"returncode": -1, "tail": [str(exc)]}
        lines = (done.stdout + done.stderr).splitlines()
        return {"returncode": done.returncode, "tail": lines[-_TAIL:]}
    namespace = {"__name__": "verl_bootstrap_node_report"}
    exec(compile(request["node_source"], "node_report.py", "exec"), namespace)
    return namespace["node_report"](**request["args"])


def _describe(node):
    return {
        "node_id": node["NodeID"],
        "node_ip": node.get("NodeManagerAddress"),
        "node_name": node.get("NodeName") or node.get("NodeManagerHostname"),
    }


def main():
    request = json.loads(sys.argv[1])
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=request["address"], log_to_driver=False, logging_level="ERROR")
    nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
    task = ray.remote(num_cpus=0, max_retries=0)(on_node)
    pending = [
        (
            node,
            task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(request),
        )
        for node in nodes
    ]
    answers = []
    for node, ref in pending:
        try:
            answer = ray.get(ref, timeout=request["timeout"] + 60)
        except Exception as exc:  # a node that dies or times out is a finding, not a crash
            answer = {"error": f"the task on this node failed: {type(exc).__name__}"}
        answers.append({**_describe(node), **answer})
    ray.shutdown()
    sys.stdout.write("\n" + MARK + json.dumps(answers) + "\n")


if __name__ == "__main__":
    main()
