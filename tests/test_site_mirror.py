"""A site config pointing at the lab's own mirrors makes the cpu install use only those.

Real: a local PEP 503 index of real wheels and a git mirror of the local verl repo, served over
HTTP behind a token; pip's own settings removed (PIP_CONFIG_FILE=/dev/null, no PIP_*), uv's
default index and every proxied host made unreachable for the run. See labfixtures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from labfixtures import DEAD, lab, lab_env
from labmirror import CACHE

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def built() -> object:
    env = lab_env()
    assert env.returncode == 0, env.stderr[-3000:] + env.stdout[-3000:]
    return env


def _commands(prefix: Path) -> list[str]:
    logs = sorted((prefix / ".verl-bootstrap" / "logs").glob("*/*.log"))
    return [ln for log in logs for ln in log.read_text().splitlines() if ln.startswith("$ ")]


def test_the_install_succeeds_and_verifies(built: object) -> None:
    report = built.report  # type: ignore[attr-defined]
    assert report["ok"] is True
    assert {s["id"]: s["status"] for s in report["steps"]}["verify"] == "done"


def test_every_package_came_from_the_lab_index(built: object) -> None:
    prefix: Path = built.prefix  # type: ignore[attr-defined]
    installs = [c for c in _commands(prefix) if " pip install " in c]
    assert installs, "no install command was logged"
    for command in installs:
        assert "--default-index 'http://***@127.0.0.1:" in command
        assert "/opt/" not in command and DEAD not in command
        hosts = set(re.findall(r"https?://(?:[^@/\s]*@)?([^/:'\s]+)", command))
        assert hosts == {"127.0.0.1"}, hosts
    fetched = {p.split("/")[2] for p in built.requests if p.startswith("/simple/")}  # type: ignore[attr-defined]
    assert {"torch", "ray", "transformers", "setuptools"} <= fetched
    wheels = [p for p in built.requests if p.startswith("/files/")]  # type: ignore[attr-defined]
    assert any("torch-2.13.0" in w for w in wheels)


def test_verl_came_from_the_git_mirror_at_its_commit(built: object) -> None:
    prefix: Path = built.prefix  # type: ignore[attr-defined]
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text())
    source = state["steps"]["fetch-source"]["outputs"]
    assert source["kind"] == "git"
    assert source["repo"] == "https://github.com/verl-project/verl.git"  # the canonical URL is kept
    assert source["commit"] == lab().commit
    assert any(p.startswith("/git/verl.git/") for p in built.requests)  # type: ignore[attr-defined]


def test_the_sites_uv_cache_was_used(built: object) -> None:
    assert any((CACHE / "uv-lab").iterdir())
