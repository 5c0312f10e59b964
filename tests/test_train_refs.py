"""`verify --train` at every ref the cpu profile serves: the route each release gets on a CPU,
decided from that release's real sdist (the default index's, cached: tests/verlrepo.py).

The default suite reads each sdist's source with the probe `verify --train` runs in an env
(`train_assets.py locate`: which public hooks verl has, nothing imported) and asks the route
what it decides; a ref that cannot train on a CPU must say why. The real training runs at the
other refs are behind the marker `train_refs` (`make test-train-refs`): each installs a cpu env
at that ref, minutes apiece on a shared 2-core host. v0.8.0's stack takes torch 2.8.0's CPU build:
a host without the PyTorch CPU index (or a find-links folder holding that wheel) cannot install it,
and its cases fail there with preflight's word on how to fix that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from cpuenv import install_cpu_env, run_cli
from verlrepo import make_verl_repo, verl_sdist

from verl_bootstrap.paths import PROBES
from verl_bootstrap.profile import load_profile
from verl_bootstrap.verify.trainroute import PARTS, cpu_blocker

# What each release's sdist shows (checked by hand with `pip download verl==X --no-deps
# --no-binary :all:`): 0.9.0 added verl/plugin/platform; every release has the other hooks.
CAN_TRAIN_ON_CPU = {"0.9.1": True, "0.9.0": True}


def _refs() -> list[str]:
    profile = load_profile("cpu")
    return [profile.verl.ref, *(ref for stack in profile.stacks for ref in stack.refs)]


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each served release's verl package folder, from its real sdist."""
    folders = {}
    for ref in _refs():
        version = ref.removeprefix("v")
        dest = tmp_path_factory.mktemp(f"verl-{version}")
        with tarfile.open(verl_sdist(version)) as tar:  # verl's package alone: what locate reads
            package = [m for m in tar.getmembers() if m.name.split("/")[1:2] == ["verl"]]
            tar.extractall(dest, members=package, filter="data")
        (folders[version],) = dest.glob("verl-*/")
    return folders


def _locate(tree: Path) -> dict[str, object]:
    """The probe's answer with the sdist's tree first on the path (nothing of it imported)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONNOUSERSITE": "1"}
    done = subprocess.run(
        [sys.executable, "-S", str(PROBES / "train_assets.py"), "locate"],
        env=env,
        cwd=tree.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("@@TRAIN@@"))
    answer: dict[str, object] = json.loads(line.removeprefix("@@TRAIN@@"))
    return answer


def test_the_profile_serves_the_refs_this_file_knows() -> None:
    assert sorted(_refs()) == ["v0.6.1", "v0.7.0", "v0.7.1", "v0.8.0", "v0.9.0", "v0.9.1"]


@pytest.mark.parametrize("ref", ["v0.6.1", "v0.7.0", "v0.7.1", "v0.8.0", "v0.9.0", "v0.9.1"])
def test_each_ref_trains_on_a_cpu_or_says_why(ref: str, unpacked: dict[str, Path]) -> None:
    version = ref.removeprefix("v")
    found = _locate(unpacked[version])
    assert found["verl"] is True and found["version"] == version
    why = cpu_blocker(found)
    if CAN_TRAIN_ON_CPU.get(version):
        assert why == ""
    else:
        assert why == (
            f"verl {version} has no platform registry (verl/plugin/platform), through which "
            "the tool supplies a CPU platform, engine and rollout: on a CPU this release cannot "
            "train without edits to verl; on a GPU host it runs as is"
        )
    # the hooks other than the platform registry, and both levels' entry points, are in each
    assert found["external_modules"] and found["engine_registry"] and found["rollout_registry"]
    for module in (PARTS["sft"][0], PARTS["rl"][0]):
        assert (unpacked[version] / (module.replace(".", "/") + ".py")).is_file(), module


def test_a_tree_without_the_hook_says_which(tmp_path: Path) -> None:
    """The external-module hook is checked first: without it nothing of the plugin loads."""
    package = tmp_path / "verl"
    (package / "version").mkdir(parents=True)
    (package / "version" / "version").write_text("9.9.9\n")
    (package / "__init__.py").write_text("# no hook here\n")
    found = _locate(tmp_path)
    assert found["version"] == "9.9.9" and not found["external_modules"]
    assert cpu_blocker(found).startswith(
        "verl 9.9.9 has no external-module hook (VERL_USE_EXTERNAL_MODULES in verl/__init__.py)"
    )


@pytest.fixture(scope="module")
def env_at(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A real cpu env installed at a ref (each ref once per module)."""
    made: dict[str, Path] = {}

    def install(ref: str) -> Path:
        if ref not in made:
            version = ref.removeprefix("v")
            repo = make_verl_repo(tmp_path_factory.mktemp("verl") / "verl", version)
            installed = install_cpu_env(tmp_path_factory, repo, ref=ref)
            assert installed.first.code == 0, installed.first.stderr
            made[ref] = installed.prefix
        return made[ref]

    return install


@pytest.mark.train_refs
@pytest.mark.parametrize("ref", ["v0.9.0", "v0.8.0"])
@pytest.mark.parametrize("level", ["sft", "rl"])
def test_verify_train_at_the_ref(ref: str, level: str, env_at: Callable[[str], Path]) -> None:
    """`verify --train LEVEL` in a cpu env at the ref: it trains, or (0.8.0 and older) it says
    why, with a failing exit code."""
    run = run_cli(["verify", "--prefix", str(env_at(ref)), "--train", level, "--json"])
    train = run.body["train"]
    checks = {c["name"]: c for c in train["checks"]}
    if CAN_TRAIN_ON_CPU.get(ref.removeprefix("v")):
        assert run.code == 0, checks
        assert checks["weights changed"]["status"] == checks["resume"]["status"] == "ok"
        if level == "rl":
            assert checks["log-prob agreement"]["status"] == "ok", checks
    else:
        assert run.code == 1
        assert checks[f"{level} step"]["status"] == "skipped"
        assert "has no platform registry" in checks[f"{level} step"]["detail"]
