"""The lab shared by the site, onboarding, secrets and cluster tests, made once per test process.

One mirror host (wheels, a PEP 503 index, a git mirror of the local verl repo, the lab's config
files, all over HTTP on loopback behind a token) and one cpu env built from it through a site
config, with pip's own settings removed and every other index made unreachable. Several test
modules share them, so they are cached per process rather than as per-module fixtures.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from labextras import lock_extras
from labmirror import CACHE, LabHTTPServer, git_mirror, mirror_wheels, start_server
from scaffold import TOOL, process_scratch, run_tool
from verlrepo import git, make_verl_repo

TOKEN = "s3cr3t-lab-token-7f3a9c"  # distinctive, so a leak is easy to grep for
DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens, every connection is refused
_STABLE_PORT = 47391  # a stable port keeps uv's cache warm across test runs
COMMITTED_LOCK = Path(__file__).parents[1] / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"


@dataclass(frozen=True)
class Lab:
    """The lab's mirror host and the folder its files live in."""

    base: Path  # world-readable: a non-root user may need to read files here
    server: LabHTTPServer
    commit: str  # the verl commit the git mirror serves
    site: Path  # served at /site/

    def url(self, path: str, *, token: str | None = "${LAB_TOKEN}") -> str:
        """A URL on the mirror host, with credentials as a lab config writes them."""
        port = self.server.server_address[1]
        cred = f"lab:{token}@" if token else ""
        return f"http://{cred}127.0.0.1:{port}/{path.lstrip('/')}"


@functools.cache
def lab() -> Lab:
    """Start the lab (once per process)."""
    base = process_scratch("vb-lab-")
    base.chmod(0o755)
    repo = make_verl_repo(base / "verl-src")
    git_root = base / "git"
    git_mirror(repo, git_root / "verl.git")
    site = base / "site"
    site.mkdir()
    server = _start(base / "tool-wheels", git_root, site)
    return Lab(base=base, server=server, commit=git(repo, "rev-parse", "HEAD"), site=site)


def _start(tool_wheels: Path, git_root: Path, site: Path) -> LabHTTPServer:
    tool_wheels.mkdir(exist_ok=True)
    folders = (mirror_wheels(), lock_extras(COMMITTED_LOCK), tool_wheels)
    try:
        return start_server(
            wheels=folders, git_root=git_root, site=site, token=TOKEN, port=_STABLE_PORT
        )
    except OSError:  # the stable port is taken: any port will do
        return start_server(wheels=folders, git_root=git_root, site=site, token=TOKEN)


def lab_config(lab: Lab, token: str | None = "${LAB_TOKEN}", **defaults: Any) -> dict[str, Any]:
    """The lab's site config: only the lab's mirrors, and a dead proxy for everything else.

    With `token=None` the URLs carry no credentials (the users' ~/.netrc holds them).
    """
    return {
        "schema_version": 1,
        "mirrors": {
            "pypi": {"index_url": lab.url("simple", token=token)},
            "pytorch": {"cpu": lab.url("simple", token=token)},
            "git": {"https://github.com/verl-project/": lab.url("git/", token=token)},
        },
        "network": {
            "proxy": {"http": DEAD, "https": DEAD, "no_proxy": ["127.0.0.1", "localhost"]},
        },
        "defaults": {"profile": "cpu", **defaults},
    }


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    """Write `data` as YAML (readable by anyone: a lab publishes its config)."""
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    path.chmod(0o644)
    return path


@functools.cache
def _tool_cache() -> Path:
    """The tool's cache for this process's lab runs (private, 0700, made once).

    The lab's verl repository is made anew in each test process, under the same canonical URL;
    a git mirror kept in the user's cache from an earlier process holds other commits, so every
    lab run starts from a cache of its own, as on a fresh machine.
    """
    return process_scratch("vb-lab-cache-")  # ~100 MB of mirrors, removed at exit


def clean_environ(**extra: str) -> dict[str, str]:
    """This process's environment without pip's or uv's settings; the default index is dead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        UV_DEFAULT_INDEX=f"{DEAD}/simple",
        UV_INDEX_URL=f"{DEAD}/simple",
        LAB_TOKEN=TOKEN,
        VERL_BOOTSTRAP_CACHE=str(_tool_cache()),
    )
    env.update(extra)
    return env


@dataclass(frozen=True)
class LabEnv:
    """The cpu env built from the lab's mirrors, and what the run printed and fetched."""

    prefix: Path
    config: Path
    returncode: int
    stdout: str
    stderr: str
    requests: tuple[str, ...]

    @property
    def report(self) -> dict[str, Any]:
        """The install's --json report."""
        return dict(json.loads(self.stdout))


@functools.cache
def lab_env() -> LabEnv:
    """Build the cpu env from the lab's mirrors only (once per process).

    It resolves (`--resolve`): the lab's point is that every package and verl's git checkout come
    through its mirrors, while the committed lock records verl's release sdist (made where GitHub
    was out of reach), which would take the run past the git mirror.
    """
    the_lab = lab()
    config = write_yaml(
        the_lab.base / "lab.yaml", {**lab_config(the_lab), "caches": {"uv": str(CACHE / "uv-lab")}}
    )
    prefix = the_lab.base / "envs" / "cpu"
    before = len(the_lab.server.requests)
    args = ("install", "--config", str(config), "--prefix", str(prefix), "--resolve", "--json")
    done = run_tool(*args, script=TOOL, env=clean_environ(), cwd=None, timeout=600)
    requests = tuple(the_lab.server.requests[before:])
    return LabEnv(prefix, config, done.returncode, done.stdout, done.stderr, requests)
