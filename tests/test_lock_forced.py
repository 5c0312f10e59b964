"""Overrides only where they are forced: a pin outside a locked wheel's own requirement is named
unless an override forces it, `lock` takes a release that meets both where one exists, and
`verify` tells a recorded forced mismatch (a warning) from any other (a failure).

Real throughout: wheels' METADATA read from the default index, real overrides (verl 0.9.1's
`numpy>=2.0.0`), real resolutions and a real env with a real `uv pip check`. The pairs are
numba 0.65.0, which requires numpy<2.5 (a release, 2.4.x, meets both it and verl's override),
and flask 3.1.2, which requires werkzeug>=3.1.0 (none meets both it and `werkzeug==3.0.6`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from lockfixtures import CUTOFF
from packaging.requirements import Requirement
from packaging.version import Version
from scaffold import run_tool

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.resolve import Target
from verl_bootstrap.installer.wheelmeta import WheelFile, wheel_requirements
from verl_bootstrap.lock.drift import committed_lockfiles
from verl_bootstrap.lock.format import ForcedMismatch, Lockfile
from verl_bootstrap.lock.io import read_lockfile, recorded_forced, write_lockfile
from verl_bootstrap.lock.lookup import lookup_dists
from verl_bootstrap.lock.making.contract import MetadataCheck
from verl_bootstrap.lock.making.forced import forced_lines, mismatches, overrides_in_force
from verl_bootstrap.lock.making.reproduce import forced_gaps
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import LOCKFILES_DIR, env_lockfile
from verl_bootstrap.profile.load import load_profile
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.profile.verlextras import marker_env, verl_overrides
from verl_bootstrap.verify.env import verify_env

# the default index alone: this machine's own pip settings shape no lock
CLEAN_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))},
    "PIP_CONFIG_FILE": os.devnull,
}
ENV_312 = marker_env("3.12", "linux-64")
NUMBA = ("numba", "0.65.0")


def _requirements(
    name: str, version: str, work: Path, lock: Lockfile | None = None
) -> tuple[str, ...]:
    """A wheel's Requires-Dist, read from the default index (the lock's wheel, where given)."""
    python, platform, glibc = ("3.12", "linux-64", "2.31")
    if lock is not None:
        python, platform = lock.python, lock.platform
        glibc = lock.cuda.virtual_packages.get("__glibc", glibc)
    target = Target(python, platform, CUTOFF, False, glibc)
    dist = lock.distributions()[name] if lock is not None else None
    from verl_bootstrap.lock.format import LockedDist  # noqa: PLC0415 - a stand-in pin

    wanted = dist or LockedDist(name=name, version=version)
    served = lookup_dists([wanted], None, target, IndexSettings(), work=work / name)
    wheels = [a for a in served[name] if a.kind == "wheel"]
    chosen = next((a for a in wheels if not dist or a.sha256 in dist.hashes), wheels[0])
    wheel = WheelFile(name, chosen.url, chosen.sha256, chosen.size)
    found = wheel_requirements([wheel], _cache(), offline=False)[name]
    assert found is not None, f"{name} {version}: its METADATA could not be read"
    return found


def _cache() -> Path:
    from verl_bootstrap.paths import cache_folder  # noqa: PLC0415

    return cache_folder("wheel-metadata")


def test_an_override_that_erases_a_real_bound_is_a_mismatch_until_recorded(
    verl_repo_session: Path, tmp_path: Path
) -> None:
    numba = _requirements(*NUMBA, tmp_path)
    overrides = overrides_in_force(verl_overrides(verl_repo_session / "pyproject.toml"), ENV_312)
    assert overrides["numpy"] == "numpy>=2.0.0"  # verl 0.9.1's own
    locked = {"numba": "0.65.0", "numpy": "2.5.5", "llvmlite": "0.47.0"}
    [found] = mismatches(locked, {"numba": numba}, ENV_312, overrides)
    assert (found.package, found.required_by, found.override) == ("numpy", "numba", "numpy>=2.0.0")
    assert Version("2.5.5") not in Requirement(found.requirement).specifier
    [line] = forced_lines([found], ())
    assert line.startswith("pins numpy==2.5.5, but numba 0.65.0 requires numpy")
    assert "erases that bound, and the lock does not record it as forced" in line
    assert forced_lines([found], (found.record(),)) == []  # recorded: no difference
    # without an override, nothing explains it
    [bare] = mismatches(locked, {"numba": numba}, ENV_312, {})
    assert bare.line().endswith("(no override explains it)")
    # a numpy within the bound is no mismatch; a record its pins no longer have is one
    assert mismatches({**locked, "numpy": "2.4.6"}, {"numba": numba}, ENV_312, overrides) == []
    [stale] = forced_lines([], (found.record(),))
    assert stale.startswith("records a forced mismatch its pins do not have: numba 0.65.0")


@pytest.mark.real_slow  # a real lock against the index (about a minute)
def test_no_committed_lock_holds_a_numpy_outside_numbas_own_bound(tmp_path: Path) -> None:
    """numba 0.65.0 needs numpy<2.5 (`import numba` refuses 2.5): verl's `numpy>=2.0.0`
    override erased that bound from the resolution, and no lock may keep what it erased."""
    holding = [read_lockfile(p) for p in committed_lockfiles(LOCKFILES_DIR)]
    holding = [lock for lock in holding if "numba" in lock.distributions()]
    assert holding, "no committed lock holds numba"
    seen: dict[tuple[str, str], tuple[str, ...]] = {}
    for lock in holding:
        numba = lock.distributions()["numba"]
        key = (numba.version, lock.platform)
        if key not in seen:
            seen[key] = _requirements("numba", numba.version, tmp_path / lock.platform, lock)
        numpy = lock.distributions()["numpy"].version
        bounds = [Requirement(r) for r in seen[key] if Requirement(r).name == "numpy"]
        outside = [str(b) for b in bounds if Version(numpy) not in b.specifier]
        assert not outside, f"{lock.regenerate}: numpy {numpy} beside numba {numba.version}"


def test_a_forced_mismatch_names_its_package_in_both_requirements(tmp_path: Path) -> None:
    good = dict(
        package="werkzeug",
        requirement="werkzeug>=3.1.0",
        required_by="flask",
        required_by_version="3.1.2",
        override="werkzeug==3.0.6",
    )
    assert ForcedMismatch(**good).line() == (  # type: ignore[arg-type]
        "flask 3.1.2 requires werkzeug>=3.1.0, which the override 'werkzeug==3.0.6' forces aside"
    )
    lock = read_lockfile(LOCKFILES_DIR / "cpu" / "cpu-linux-64.lock.yaml")
    for bad in ({"requirement": "numpy<2.5"}, {"override": "werkzeug ==="}):
        entry = ForcedMismatch.model_construct(**{**good, **bad})
        path = write_lockfile(lock.model_copy(update={"forced": (entry,)}), tmp_path / "l.yaml")
        with pytest.raises(InputError, match="forced"):
            read_lockfile(path)


FORCED_PROFILE = """\
schema_version: 1
name: forced-demo
verl:
  repo: https://github.com/verl-project/verl.git
  ref: v0.9.1
python:
  requires: ">=3.10,<3.13"
  prefer: "3.12"
env:
  backend: venv
cuda_variants:
  cpu:
    description: no CUDA
stages:
  - id: libs
    packages: ["numba==0.65.0", "flask==3.1.2"]
    overrides: ["numpy>=2.0.0", "werkzeug==3.0.6"]
"""


@pytest.mark.real_slow  # two real resolutions against the index and a check: ~1 min
def test_lock_restores_a_bound_a_release_meets_and_records_the_forced_one(
    tmp_path: Path, verl_repo_session: Path
) -> None:
    profile = tmp_path / "forced-demo.yaml"
    profile.write_text(FORCED_PROFILE, encoding="utf-8")
    output = tmp_path / "cpu-linux-64.lock.yaml"
    args = ["lock", "--profile", str(profile), "--cuda", "cpu", "--python-version", "3.12"]
    args += ["--exclude-newer", CUTOFF, "--verl-source", str(verl_repo_session), "-o", str(output)]
    run = run_tool(*args, timeout=900, env=CLEAN_ENV)
    assert run.returncode == 0, run.stderr
    lock = read_lockfile(output)
    locked = lock.distributions()
    assert Version(locked["numpy"].version) < Version("2.5")  # numba's bound, kept
    assert locked["werkzeug"].version == "3.0.6"  # the override, forced
    [forced] = lock.forced
    assert (forced.package, forced.required_by, forced.override) == (
        "werkzeug",
        "flask",
        "werkzeug==3.0.6",
    )
    assert "restored bounds an override erased (a release meets both): numpy<2.5" in run.stderr
    assert "forced by an override, recorded: flask 3.1.2 requires werkzeug>=3.1.0" in run.stderr
    # `lock --check`'s judgement: the recorded one is no difference; an unrecorded one is
    loaded = load_profile(str(profile))
    check = MetadataCheck(IndexSettings(), tmp_path / "check")
    pyproject = verl_repo_session / "pyproject.toml"
    assert forced_gaps(lock, loaded, pyproject, check) == []
    [gap] = forced_gaps(lock.model_copy(update={"forced": ()}), loaded, pyproject, check)
    assert gap.startswith("pins werkzeug==3.0.6, but flask 3.1.2 requires werkzeug>=3.1.0")


def _env_with_overrides(env: Path, overrides: list[str]) -> None:
    """A real env holding flask 3.1.2 with its dependencies, `overrides` forced on them."""
    subprocess.run([uv_binary(), "venv", "-q", str(env)], check=True)
    pins = env.parent / "overrides.txt"
    pins.write_text("".join(f"{o}\n" for o in overrides), encoding="utf-8")
    install = [uv_binary(), "pip", "install", "-q", "--python", str(env / "bin" / "python")]
    install += ["--exclude-newer", CUTOFF, "--override", str(pins), "flask==3.1.2"]
    subprocess.run(install, check=True, env=CLEAN_ENV)


def _pip_check(env: Path) -> tuple[str, str]:
    spec = VerifySpec(imports=(), gpu_smoke=False)
    report = verify_env(env, spec, forced=recorded_forced(env))  # as both verify routes call it
    [check] = [c for c in report.checks if c.name == "uv pip check"]
    return check.status, check.detail


def test_verify_warns_on_a_recorded_forced_mismatch_and_fails_on_any_other(
    tmp_path: Path,
) -> None:
    env = tmp_path / "env"
    _env_with_overrides(env, ["werkzeug==3.0.6", "itsdangerous==2.1.2"])
    status, detail = _pip_check(env)  # no lockfile records either
    assert status == "fail" and "werkzeug" in detail and "itsdangerous" in detail
    forced = ForcedMismatch(
        package="werkzeug",
        requirement="werkzeug>=3.1.0",
        required_by="flask",
        required_by_version="3.1.2",
        override="werkzeug==3.0.6",
    )
    lock = read_lockfile(LOCKFILES_DIR / "cpu" / "cpu-linux-64.lock.yaml")
    write_lockfile(lock.model_copy(update={"forced": (forced,)}), env_lockfile(env))
    status, detail = _pip_check(env)  # werkzeug is forced; itsdangerous still is not
    assert status == "fail" and "itsdangerous" in detail and "werkzeug" not in detail
    python = str(env / "bin" / "python")
    back = ["--exclude-newer", CUTOFF, "itsdangerous==2.2.0"]  # within flask's bound again
    subprocess.run([uv_binary(), "pip", "install", "-q", "--python", python, *back], check=True)
    status, detail = _pip_check(env)
    assert status == "warn"
    assert "mismatches the lock records as forced by an override (flask 3.1.2 requires " in detail
    assert "werkzeug>=3.1.0, which the override 'werkzeug==3.0.6' forces aside)" in detail
