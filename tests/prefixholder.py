"""Another real process holding an env's real prefix lock, for tests of runs that contend for it
(test_state_lock.py, and the queued install in test_lock_route.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from verl_bootstrap.run.state.guard import guarding

    with guarding(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(float(sys.argv[2]))
    print(f"released {time.time()!r}", flush=True)
    """
)


class Holder:
    """Another real process that holds a prefix's lock for a while."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, seconds: float) -> subprocess.Popen[str]:
        """Take the lock in a child process; return once it holds it."""
        lock = self.prefix / ".verl-bootstrap" / "lock"
        child = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(lock), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.procs.append(child)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        return child

    def stop(self) -> None:
        for child in self.procs:
            if child.poll() is None:
                child.kill()
            child.communicate()


def released_at(child: subprocess.Popen[str]) -> float:
    """When the holder let the lock go (its clock), once it has."""
    out, _ = child.communicate(timeout=30)
    return float(out.split()[-1])
