"""Where verl's checkout ships a `uv.lock`, the CUDA 13.0 x86_64 Python 3.12 stack takes its
versions exactly (uv exports them; nothing parses uv.lock), and a lock that differs is named.

verl's own uv.lock cannot be committed here (a fetched third-party file), so the test makes a
real one: real `uv lock` over verl 0.9.1's real pyproject.toml from its release sdist, trimmed to
one small extra (so that it resolves from the default index alone: `--no-sources`), with verl's
own override-dependencies and dependency-metadata, committed into a local git repo of verl.
One pin is moved back in that uv.lock (`uv lock --upgrade-package packaging==25.0`), so the
lock shows whether it took uv.lock's version or the index's newest.

A second repo's uv.lock takes one distribution (six) from a wheelhouse laid out as verl's: a
loopback simple index whose links carry no sha256, as the real one's. uv.lock then records no
hash for it; the wheelhouse is shut down before `lock` runs, as verl's is out of reach here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml
from lockfixtures import CUTOFF
from loopback import serve_wheelhouse
from scaffold import run_tool
from verlrepo import git, make_verl_repo

from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.uvlock import export_uv_lock, unhashed, uv_lock_gaps

# the default index alone: this machine's own pip settings shape no lock
CLEAN_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))},
    "PIP_CONFIG_FILE": os.devnull,
}
PROFILE = """\
schema_version: 1
name: uvlocked
verl:
  repo: https://github.com/verl-project/verl.git
  ref: v0.9.1
python:
  requires: ">=3.10,<3.13"
  prefer: "3.12"
env:
  backend: venv
cuda_variants:
  cu130:
    cuda: "13.0"
    min_driver: "580"
stages:
  - id: verl-deps
    kind: verl-deps
    extras: [math]
"""


def _trimmed(pyproject: Path, house: str | None = None) -> str:
    """verl's pyproject with one small extra (torch at verl's GPU pin, 2.11.0, the CUDA 13.0
    build), and of [tool.uv] the parts the default index can serve: environments (x86_64),
    override-dependencies and dependency-metadata."""
    text = pyproject.read_text(encoding="utf-8")
    uv = tomllib.loads(text)["tool"]["uv"]
    head = text[: text.index("[project.optional-dependencies]")]
    middle = text[text.index("[tool.ruff]") : text.index("[tool.uv]")]
    extra = ["math-verify", "torch==2.11.0", *(["six"] if house else [])]
    extras = f"[project.optional-dependencies]\nmath = {json.dumps(extra)}\n\n"
    tool = "[tool.uv]\n" + f"environments = {json.dumps(uv['environments'][:1])}\n"
    tool += f"override-dependencies = {json.dumps(uv['override-dependencies'])}\n"
    if house:  # as verl takes its wheelhouse builds: an explicit index, named as a source
        tool += "exclude-newer-package = { six = false }\n"  # its links carry no upload time
        tool += f'\n[[tool.uv.index]]\nname = "verl-wheelhouse"\nurl = "{house}"\nexplicit = true\n'
        tool += '\n[tool.uv.sources]\nsix = { index = "verl-wheelhouse" }\n'
    for entry in uv["dependency-metadata"]:
        tool += "\n[[tool.uv.dependency-metadata]]\n" + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in entry.items()
        )
    return head + extras + middle + tool


@pytest.fixture(scope="module")
def uv_locked_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local verl v0.9.1 repo whose tag holds a real uv.lock (packaging moved to 25.0)."""
    repo = make_verl_repo(tmp_path_factory.mktemp("uvlock") / "verl")
    (repo / "pyproject.toml").write_text(_trimmed(repo / "pyproject.toml"), encoding="utf-8")
    lock = [uv_binary(), "lock", "--no-sources", "--exclude-newer", CUTOFF, "--quiet"]
    for argv in (lock, [*lock, "--upgrade-package", "packaging==25.0"]):
        subprocess.run(argv, cwd=repo, env=CLEAN_ENV, check=True, timeout=900)
    git(repo, "add", "pyproject.toml", "uv.lock")
    git(repo, "commit", "-q", "-m", "verl's uv integration: uv.lock")
    git(repo, "tag", "-f", "v0.9.1")
    return repo


@pytest.fixture(scope="module")
def house_locked_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local verl v0.9.1 repo whose uv.lock takes six from a wheelhouse that records no hash
    (its own uv cache: nothing of the wheelhouse is left in the cache `lock` uses), which is
    out of reach once the repo is made."""
    base = tmp_path_factory.mktemp("uvlock-house")
    wheels = base / "house" / "releases"
    wheels.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "six==1.17.0"]
    subprocess.run([*pip, "-d", str(wheels)], env=CLEAN_ENV, check=True, timeout=300)
    server = serve_wheelhouse(base / "house", "six", "releases/six-1.17.0-py2.py3-none-any.whl")
    try:
        house = (base / "house" / "base").read_text() + "/verl-wheelhouse/simple/"
        repo = make_verl_repo(base / "verl")
        trimmed = _trimmed(repo / "pyproject.toml", house)
        (repo / "pyproject.toml").write_text(trimmed, encoding="utf-8")
        own_cache = {**CLEAN_ENV, "UV_CACHE_DIR": str(base / "uv-cache")}
        lock = [uv_binary(), "lock", "--exclude-newer", CUTOFF, "--quiet"]
        subprocess.run(lock, cwd=repo, env=own_cache, check=True, timeout=900)
    finally:
        server.shutdown()
        server.server_close()
    git(repo, "add", "pyproject.toml", "uv.lock")
    git(repo, "commit", "-q", "-m", "verl's uv integration: uv.lock, six from the wheelhouse")
    git(repo, "tag", "-f", "v0.9.1")
    return repo


@pytest.fixture(scope="module")
def made(uv_locked_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`lock` of a cu130 profile over that repo, for Python 3.12 on x86_64."""
    base = tmp_path_factory.mktemp("uvlocked-lock")
    profile = base / "uvlocked.yaml"
    profile.write_text(PROFILE, encoding="utf-8")
    output = base / "cu130-linux-64.lock.yaml"
    args = ["lock", "--profile", str(profile), "--cuda", "cu130", "--python-version", "3.12"]
    args += ["--exclude-newer", CUTOFF, "--verl-source", str(uv_locked_repo), "-o", str(output)]
    run = run_tool(*args, timeout=900, env=CLEAN_ENV)
    assert run.returncode == 0, run.stderr
    return output


def test_the_stack_takes_the_uv_lock_versions(
    made: Path, uv_locked_repo: Path, tmp_path: Path
) -> None:
    lock = read_lockfile(made)
    locked = lock.distributions()
    assert locked["packaging"].version == "25.0"  # uv.lock's, not the index's newest
    pins = export_uv_lock(uv_locked_repo, ("math",), "3.12", "linux-64", tmp_path)
    assert pins is not None and pins["packaging"].version == "25.0"
    assert pins["torch"].version == "2.11.0" == locked["torch"].version
    # every pin uv.lock has for this stack is the lock's, with the same artifacts
    assert uv_lock_gaps(locked, pins, ()) == []
    assert {n for n in pins if n in locked} == set(pins) - {"verl"}


def test_a_lock_that_differs_from_uv_lock_is_named(
    made: Path, uv_locked_repo: Path, tmp_path: Path
) -> None:
    data = yaml.safe_load(made.read_text(encoding="utf-8"))
    for stage in data["stages"]:
        for dist in stage["distributions"]:
            if dist["name"] == "packaging":
                dist["version"] = "26.4"
    (tmp_path / "moved.lock.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    moved = read_lockfile(tmp_path / "moved.lock.yaml")
    pins = export_uv_lock(uv_locked_repo, ("math",), "3.12", "linux-64", tmp_path)
    assert pins is not None
    assert uv_lock_gaps(moved.distributions(), pins, ()) == [
        "pins packaging==26.4, verl's uv.lock has 25.0"
    ]


def test_a_checkout_without_uv_lock_gives_no_pins(tmp_path: Path) -> None:
    assert export_uv_lock(tmp_path, ("math",), "3.12", "linux-64", tmp_path) is None


def test_a_pin_uv_lock_records_no_hash_for_is_a_named_gap_offline(
    house_locked_repo: Path, tmp_path: Path
) -> None:
    # the wheelhouse is down: uv's PEP 751 export would download six to hash it, and fail
    pins = export_uv_lock(house_locked_repo, ("math",), "3.12", "linux-64", tmp_path)
    assert pins is not None and pins["six"].version == "1.17.0" and pins["six"].hashes == ()
    assert unhashed(pins) == ["six 1.17.0"]
    assert pins["packaging"].hashes  # what uv.lock hashes keeps its hashes
    profile = tmp_path / "uvlocked.yaml"
    profile.write_text(PROFILE, encoding="utf-8")
    output = tmp_path / "cu130-linux-64.lock.yaml"
    args = ["lock", "--profile", str(profile), "--cuda", "cu130", "--python-version", "3.12"]
    args += ["--exclude-newer", CUTOFF, "--verl-source", str(house_locked_repo), "-o", str(output)]
    run = run_tool(*args, timeout=900, env=CLEAN_ENV)
    assert run.returncode == 0, run.stderr
    assert "verl's uv.lock records no sha256 for six 1.17.0" in run.stderr
    assert "another pyproject.toml" not in run.stderr
    locked = read_lockfile(output).distributions()
    assert locked["six"].version == "1.17.0"  # uv.lock's version, from the default index
