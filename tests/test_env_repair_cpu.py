"""The cpu env, for real, damaged by hand: `uv pip uninstall msgspec` in it, then the same
command that made it puts msgspec back (the stage that owns it, then the record and the
verification) and ends verified; a run after that finds nothing to repair.

Its own module: the tiny env's module (test_env_trust.py) points pip's find-links elsewhere
while it runs, which the shared cpu env must not be built under."""

from __future__ import annotations

import subprocess

from cpuenv import Installed
from scaffold import run_cli
from test_lifecycle import versions

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.installer.cmdline import uv_binary


def test_the_cpu_env_gets_msgspec_back_after_an_uninstall_by_hand(
    cpu_env_session: Installed,
) -> None:
    env = cpu_env_session
    assert env.first.code == EXIT_OK, env.first.stderr
    python = str(env.prefix / "bin" / "python")
    subprocess.run([uv_binary(), "pip", "uninstall", "--python", python, "msgspec"], check=True)
    again = run_cli(env.argv)
    assert again.code == EXIT_OK, again.stderr
    assert [s for s, status in again.statuses.items() if status == "done"] == [
        "verl-deps",
        "record-lock",
        "verify",
    ]
    (line,) = again.body["drift"]["repaired"]
    assert line.startswith("msgspec ") and line.endswith(" is missing: stage verl-deps runs again")
    assert again.body["verify"]["ok"] is True
    assert "msgspec" in versions(env.prefix)
    intact = run_cli(env.argv)  # and the env is whole again: nothing left to repair
    assert set(intact.statuses.values()) == {"skipped"}
    assert intact.body["drift"]["repaired"] == []
