"""Runs in the env's own Python (it has Ray): a real local Ray cluster of several tiny nodes.

Each node is its own raylet with its own environment (`env_vars`), as separate machines would
be; a node's $VB_ENV says where that node keeps the env. Prints the address, then runs until
the stop file appears.
Usage: python raycluster.py '<json list of per-node env dicts>' STOP_FILE
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ray.cluster_utils import Cluster

_NODE = {"num_cpus": 1, "object_store_memory": 80 * 1024**2}


def main() -> None:
    nodes = json.loads(sys.argv[1])
    stop = Path(sys.argv[2])
    head = {**_NODE, "include_dashboard": False, "env_vars": nodes[0]}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    for env in nodes[1:]:
        cluster.add_node(**_NODE, env_vars=env)
    cluster.wait_for_nodes()
    print(json.dumps({"address": cluster.address}), flush=True)
    try:
        while not stop.exists():
            time.sleep(0.2)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
