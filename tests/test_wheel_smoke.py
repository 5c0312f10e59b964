"""The installed tool is the checkout: the wheel `uv build` makes, installed into a fresh venv with
no source tree beside it, plans every shipped profile and variant exactly as the checkout does,
and its `kernels coverage` (which reads profiles/kernel-wheels/recorded.yaml) is the checkout's.
`make smoke-wheel` runs this file (CI too: .ci/run); `make test` leaves it out, as it takes
about 80 s on two cores."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scaffold import TOOL as CHECKOUT_TOOL
from scaffold import run_tool

from verl_bootstrap.installer.cmdline import find_uv
from verl_bootstrap.profile import list_profiles, load_profile

REPO = Path(__file__).resolve().parents[1]
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", "bench")
pytestmark = pytest.mark.wheel
VARIANTS = [(p, v) for p in list_profiles() for v in load_profile(p).cuda_variants]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl-bootstrap from its wheel in a fresh venv; the source it was built from is removed."""
    uv = find_uv()
    assert uv is not None
    base = tmp_path_factory.mktemp("wheel-smoke")
    source = base / "source"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE)
    build = [uv, "build", "--wheel", "-q", "--out-dir", str(base / "built"), str(source)]
    subprocess.run(build, check=True, capture_output=True)
    shutil.rmtree(source)
    (wheel,) = (base / "built").glob("verl_bootstrap-*.whl")
    venv = base / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    done = subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return venv / "bin" / "verl-bootstrap"


def _run(tool: Path, *args: str, cwd: Path) -> str:
    done = run_tool(*args, script=tool, cwd=cwd, timeout=600)
    assert done.returncode == 0, f"{tool} {' '.join(args)}: {done.stderr}"
    return done.stdout


def _plan(tool: Path, profile: str, variant: str, cwd: Path) -> dict[str, Any]:
    """The plan's JSON, with the tool's own folders said the same way: where its uv lives, and
    where its profiles and lockfiles are (the checkout, or the venv's share/verl-bootstrap)."""
    args = ("plan", "--profile", profile, "--cuda", variant, "--prefix", str(cwd / "env"))
    text = _run(tool, *args, "--json", cwd=cwd).replace(str(tool.parent), "<tool bin>")
    # the host's memory is read live by each run (a build's sizing names it): the two runs may
    # see it a GB apart on a busy host
    text = re.sub(r"\d+ GB available", "N GB available", text)
    shipped = REPO if tool == CHECKOUT_TOOL else tool.parents[1] / "share" / "verl-bootstrap"
    body: dict[str, Any] = json.loads(text.replace(f"{shipped}/", "<shipped>/"))
    return body


def test_the_installed_wheel_has_no_source_tree_to_fall_back_on(installed: Path) -> None:
    python = installed.parent / "python"
    code = "from verl_bootstrap import paths; print(paths.PROFILES_DIR); print(paths.LOCKFILES_DIR)"
    found = subprocess.run(  # not run from the checkout: `-c` puts the current folder first
        [python, "-c", code], capture_output=True, text=True, check=True, cwd=installed.parent
    )
    for line in found.stdout.split():
        assert "share/verl-bootstrap" in line and not line.startswith(str(REPO)), line
    shared = installed.parents[1] / "share" / "verl-bootstrap"
    assert (shared / "profiles" / "kernel-wheels" / "recorded.yaml").is_file()


@pytest.mark.parametrize(("profile", "variant"), VARIANTS)
def test_the_installed_tool_plans_every_profile_and_variant_as_the_checkout(
    installed: Path, profile: str, variant: str, tmp_path: Path
) -> None:
    theirs = _plan(installed, profile, variant, tmp_path)
    mine = _plan(CHECKOUT_TOOL, profile, variant, tmp_path)
    assert theirs["variant"] == variant
    assert theirs == mine


def test_kernels_coverage_of_the_installed_tool_is_the_checkouts(
    installed: Path, tmp_path: Path
) -> None:
    theirs = _run(installed, "kernels", "coverage", cwd=tmp_path)
    assert "verl-wheelhouse (project)" in theirs  # the recorded lists were read
    assert theirs == _run(CHECKOUT_TOOL, "kernels", "coverage", cwd=tmp_path)
