"""The RL step's Ray (verify --train rl) is the user's alone: a real Ray started in the shared
cpu env as verl's ray.init() starts it, with the variables the step runs with, listens on the
loopback only, keeps its session in a private folder made for the run, and leaves no token file
others can read (Ray 2.5x writes ~/.ray/auth_token with mode 0644 for a new local cluster).
Real Ray; the shared cpu install makes it real_slow (tests/conftest.py)."""

from __future__ import annotations

import ipaddress
import json
import os
import stat
import subprocess
from pathlib import Path

from cpuenv import Installed

from verl_bootstrap.verify.trainroute import Route, step_environment

PROBE = Path(__file__).parent / "rayprobe.py"


def _started(python: Path, env: dict[str, str | None], home: Path) -> dict[str, object]:
    """rayprobe.py's answer, run with the step's variables (None: unset) and `home` as HOME."""
    child = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    child.update({k: v for k, v in env.items() if v is not None})
    child["HOME"] = str(home)
    for name in (k for k, v in env.items() if v is None):
        child.pop(name, None)
    done = subprocess.run(
        [str(python), str(PROBE)],
        env=child,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_the_rl_steps_ray_is_private_to_the_user(
    cpu_env_session: Installed, tmp_path: Path
) -> None:
    python = cpu_env_session.prefix / "bin" / "python"
    route = Route(python=python, name="cpu", rollout="hf")
    home = tmp_path / "home"
    home.mkdir()
    with step_environment(route) as env:
        folder = Path(str(env["RAY_TMPDIR"]))
        token = Path(str(env["RAY_AUTH_TOKEN_PATH"]))
        answer = _started(python, env, home)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()
        assert stat.S_IMODE(token.lstat().st_mode) == 0o600 and token.parent == folder
    listening = answer["listening"]
    assert isinstance(listening, list) and listening, answer  # Ray's servers were found
    for address in listening:
        assert ipaddress.ip_address(address.rsplit(":", 1)[0]).is_loopback, answer
    assert answer["node_ip"] == "127.0.0.1"
    assert Path(str(answer["session"])).is_relative_to(folder), answer  # not /tmp/ray
    assert not (home / ".ray").exists()  # no ~/.ray/auth_token, of any mode
    assert not folder.exists()  # the run's folder goes with the run
