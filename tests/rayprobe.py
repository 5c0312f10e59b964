"""Runs in the env's own Python (it has Ray): starts Ray as verl's ray.init() does in the RL step
(RAY_ADDRESS=local, the step's variables) and prints, as JSON: every TCP socket its processes
listen on, the session folder, then shuts Ray down.
Usage: python rayprobe.py
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

import ray

_LISTEN = "0A"  # the state column of /proc/net/tcp: TCP_LISTEN


def _tree(root: int) -> set[int]:
    """`root` and every process below it (Ray's raylet, GCS, workers, agents)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _sockets(pids: set[int]) -> set[str]:
    inodes: set[str] = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = str(fd.readlink())
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _address(hex_addr: str) -> str:
    """/proc/net/tcp{,6}'s address (little-endian words) as text."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return ".".join(str(b) for b in words)
    address = ipaddress.IPv6Address(words)
    return str(address.ipv4_mapped or address)  # ::ffff:127.0.0.1 is 127.0.0.1


def listening(pids: set[int]) -> list[str]:
    """The local address of every listening TCP socket the processes hold."""
    mine = _sockets(pids)
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == _LISTEN and cols[9] in mine:
                host, port = cols[1].split(":")
                found.append(f"{_address(host)}:{int(port, 16)}")
    return sorted(found)


def main() -> None:
    ray.init(num_cpus=1)
    node = ray._private.worker._global_node  # where this node keeps its session
    print(
        json.dumps(
            {
                "listening": listening(_tree(os.getpid())),
                "session": node.get_session_dir_path(),
                "node_ip": node.node_ip_address,
            }
        ),
        flush=True,
    )
    ray.shutdown()


if __name__ == "__main__":
    main()
