"""Prebuilt kernel sources for real, on loopback: a server lays out each source as it is really
laid out (GitHub release assets under owner/repo/releases/download/TAG/, verl's wheelhouse as a
simple index whose links point at release assets) and serves the stand-in kernel (built once by
the kernel lab) under each source's real naming. An install takes the first source in the order
of trust, passes over one that does not answer, is refused a wheel of another key, and the env's
record and a lock made with the network name the file, its source and its sha256."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kernellab import (
    PROFILE,
    Lab,
    build_broken_wheel,
    install_argv,
    lock_cpu,
    write_profile,
)
from loopback import serve_wheelhouse
from scaffold import Run, run_cli

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.lock.format import KernelWheel
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import env_lockfile, file_sha256
from verl_bootstrap.plan.doctor.checks_env import find_uv

BUILD_COMMAND = " wheel -v --no-deps --no-cache-dir --no-binary standin-kernel"
COMMUNITY = "mjun0812/flash-attention-prebuild-wheels/releases/download"
VERL = "verl-project/verl-wheelhouse/releases/download"
# the community wheelhouse's naming: the version's local label states CUDA and torch
COMMUNITY_NAME = "standin_kernel-0.1.0+{cuda}torch{torch}-cp311-cp311-linux_x86_64.whl"
PLAIN_NAME = "standin_kernel-0.1.0-cp311-cp311-linux_x86_64.whl"  # verl's: no key in the name


def relabel(wheel: Path, dest: Path, local: str) -> Path:
    """The wheel with version 0.1.0+`local`, as the community's wheels carry it (file name,
    .dist-info folder, METADATA and RECORD all agree, or no installer takes it)."""
    old, new = "standin_kernel-0.1.0", f"standin_kernel-0.1.0+{local}"
    rows = []
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            name = info.filename.replace(f"{old}.dist-info", f"{new}.dist-info")
            if name.endswith(".dist-info/RECORD"):
                record_name = name
                continue
            data = src.read(info)
            if name.endswith(".dist-info/METADATA"):
                data = data.replace(b"Version: 0.1.0\n", f"Version: 0.1.0+{local}\n".encode())
            out.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{name},sha256={digest},{len(data)}")
        out.writestr(record_name, "\n".join([*rows, f"{record_name},,"]) + "\n")
    return dest


@pytest.fixture(scope="module")
def sources(kernel_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The loopback host's folder (served at the URL in its `base` file)."""
    root = tmp_path_factory.mktemp("sources")
    wheel = next(kernel_lab.wheelhouse.glob("*.whl"))
    relabel(
        wheel,
        root / COMMUNITY / "v0.9.4" / COMMUNITY_NAME.format(cuda="cpu", torch="2.13"),
        "cputorch2.13",
    )
    relabel(
        wheel,
        root / COMMUNITY / "v0.9.2" / COMMUNITY_NAME.format(cuda="cpu", torch="2.12"),
        "cputorch2.12",
    )
    verl = root / VERL / "standin-v0.1.0" / PLAIN_NAME
    verl.parent.mkdir(parents=True)
    verl.write_bytes(wheel.read_bytes())
    server = serve_wheelhouse(root, "standin-kernel", f"{VERL}/standin-v0.1.0/{PLAIN_NAME}")
    with kernel_lab.environment():
        yield root
    server.shutdown()


def lab_profile(root: Path, folder: Path, *, verl_key: dict[str, str]) -> Path:
    """The kernel-stage profile with the three sources declared, and their recorded lists."""
    base = (root / "base").read_text()
    profile = yaml.safe_load(PROFILE.read_text())
    kernel = profile["stages"][1]["kernel"]
    kernel["sources"] = [
        {
            "id": "verl-wheelhouse",
            "trust": "project",
            "index": f"{base}/verl-wheelhouse/simple/",
            "key": verl_key,
        },
        {
            "id": "community",
            "trust": "community",
            "key": {"cxx11abi": "TRUE"},
            "release": f"{base}/{COMMUNITY}/{{tag}}/standin_kernel-{{version}}+{{cuda_tag}}torch"
            "{torch_minor}-{python}-{python}-{platform}.whl",
        },
    ]
    community = [
        f"{base}/{COMMUNITY}/v0.9.4/{COMMUNITY_NAME.format(cuda='cpu', torch='2.13')}",
        f"{base}/{COMMUNITY}/v0.9.2/{COMMUNITY_NAME.format(cuda='cpu', torch='2.12')}",
    ]
    recorded = {
        "verl-wheelhouse": {
            "from": "its index",
            "wheels": [f"{base}/{VERL}/standin-v0.1.0/{PLAIN_NAME}"],
        },
        "community": {"from": "its packages list", "wheels": community},
    }
    return write_profile(folder, profile, recorded)


def kernel_wheel(lockfile: Path) -> KernelWheel:
    """The stand-in's kernel wheel as a lockfile records it."""
    lock = read_lockfile(lockfile)
    dist = next(d for s in lock.stages for d in s.distributions if d.name == "standin-kernel")
    assert dist.kernel_wheel is not None, dist
    return dist.kernel_wheel


def site(tmp_path: Path, *order: str) -> Path:
    """A site config with an empty lab wheelhouse (and kernel_sources when given)."""
    path = tmp_path / "site.yaml"
    text = f"schema_version: 1\nwheelhouse: {tmp_path / 'house'}\n"
    if order:
        text += f"kernel_sources: [{', '.join(order)}]\n"
    path.write_text(text)
    return path


def install(profile: Path, prefix: Path, repo: Path, config: Path) -> Run:
    argv = install_argv(prefix, repo, "--config", str(config))
    argv[argv.index(str(PROFILE))] = str(profile)
    return run_cli(argv)


STATED = {"torch": "2.13.0", "cuda": "cpu", "cxx11abi": "TRUE"}


def passed_over(prefix: Path) -> list[tuple[str, str]]:
    """(source, cause) for each candidate the stand-in's stage passed over, in order: those with
    no wheel for the env, then those tried (the stage's `passed_over` output)."""
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text("utf-8"))
    kernel = state["steps"]["standin"]["outputs"]["kernel"]
    return [(s, p["cause"]) for p in kernel["passed_over"] for s in p["sources"]]


def planned_over(kernel: dict[str, Any]) -> set[tuple[str, str]]:
    """(source, cause) for each source a plan's kernel choice passed over."""
    return {(s, p["cause"]) for p in kernel["passed_over"] for s in p["sources"]}


def test_the_most_trusted_source_serves_and_one_that_fails_passes_to_the_next(
    sources: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    verl = sources / VERL / "standin-v0.1.0" / PLAIN_NAME
    hidden = verl.with_suffix(".away")
    verl.rename(hidden)  # verl's index links to an asset that is gone (a 404)
    try:
        run = install(profile, tmp_path / "env", kernel_lab.repo, site(tmp_path))
    finally:
        hidden.rename(verl)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert ("verl-wheelhouse", "unavailable") in passed_over(tmp_path / "env")
    assert BUILD_COMMAND not in log and "g++" not in log
    # the env's record names the file, its source and its hash: a --locked install takes it
    wheel = kernel_wheel(env_lockfile(tmp_path / "env"))
    name = COMMUNITY_NAME.format(cuda="cpu", torch="2.13")
    assert (wheel.source, wheel.origin, wheel.trust) == ("release", "community", "community")
    assert wheel.url is not None and wheel.url.endswith(f"/v0.9.4/{name}")
    assert wheel.sha256 == file_sha256(sources / COMMUNITY / "v0.9.4" / name)


def test_a_wheel_that_fails_its_load_check_is_uninstalled_and_the_next_source_taken(
    sources: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    """verl's wheelhouse re-uploads under the same name (its names state no key): here its asset
    is a wheel built for another torch, whose module has an undefined symbol."""
    uv = find_uv()
    assert uv is not None
    broken = build_broken_wheel(uv, kernel_lab.root / "env-a" / "bin" / "python", tmp_path)
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    verl = sources / VERL / "standin-v0.1.0" / PLAIN_NAME
    good = verl.read_bytes()
    verl.write_bytes(broken.read_bytes())  # the same file name, other bytes
    try:
        run = install(profile, tmp_path / "env", kernel_lab.repo, site(tmp_path))
    finally:
        verl.write_bytes(good)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert ("verl-wheelhouse", "load-failed") in passed_over(tmp_path / "env")
    assert "undefined symbol _ZN3c1023symbol_of_another_torchEi" in log
    assert " pip uninstall " in log  # really removed before the next wheel went in
    assert BUILD_COMMAND not in log and "g++" not in log
    wheel = kernel_wheel(env_lockfile(tmp_path / "env"))
    assert (wheel.source, wheel.origin) == ("release", "community")
    name = COMMUNITY_NAME.format(cuda="cpu", torch="2.13")
    assert wheel.sha256 == file_sha256(sources / COMMUNITY / "v0.9.4" / name)


def test_a_site_config_orders_the_sources_and_the_index_route_installs(
    sources: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    run = install(profile, tmp_path / "env", kernel_lab.repo, site(tmp_path, "verl-wheelhouse"))
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert "kernel_sources turns off wheelhouse, community" not in log  # a source was served
    wheel = kernel_wheel(env_lockfile(tmp_path / "env"))
    assert (wheel.source, wheel.origin, wheel.trust) == ("index", "verl-wheelhouse", "project")
    assert wheel.sha256 == file_sha256(sources / VERL / "standin-v0.1.0" / PLAIN_NAME)
    assert wheel.key.torch == "2.13.0" and BUILD_COMMAND not in log


def test_a_wheel_stated_for_another_torch_is_refused_and_the_plan_says_why(
    sources: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    other = {"torch": "2.12.0", "cuda": "cpu", "cxx11abi": "TRUE"}
    profile = lab_profile(sources, tmp_path / "profile", verl_key=other)
    config = site(tmp_path, "verl-wheelhouse")
    argv = [
        "plan",
        "--profile",
        str(profile),
        "--prefix",
        str(tmp_path / "env"),
        "--verl-source",
        str(kernel_lab.repo),
        "--config",
        str(config),
    ]
    run = run_cli(argv)
    assert run.code == EXIT_OK
    kernel = next(s for s in run.body["steps"] if s["id"] == "standin")["kernel"]
    assert kernel["source"] == "build"
    assert planned_over(kernel) == {
        ("verl-wheelhouse", "other-build"),
        ("wheelhouse", "off"),
        ("community", "off"),
    }


def test_a_lock_made_with_the_network_records_the_wheel_source_and_hash(
    sources: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    profile = lab_profile(
        sources,
        tmp_path / "profile",
        verl_key={"torch": "2.12.0", "cuda": "cpu", "cxx11abi": "TRUE"},
    )
    out = tmp_path / "kernel.lock.yaml"
    lock_cpu(profile, kernel_lab.repo, out)
    lock = read_lockfile(out)
    dist = next(d for s in lock.stages for d in s.distributions if d.name == "standin-kernel")
    assert dist.source == "sdist"  # the index has only the sdist
    wheel = kernel_wheel(out)
    assert (wheel.source, wheel.origin, wheel.trust) == ("release", "community", "community")
    name = COMMUNITY_NAME.format(cuda="cpu", torch="2.13")
    assert wheel.file == name and wheel.url is not None and wheel.url.endswith(f"/v0.9.4/{name}")
    assert wheel.sha256 == file_sha256(sources / COMMUNITY / "v0.9.4" / name)
    assert wheel.key.torch == "2.13" and wheel.key.cuda == "cpu" and wheel.key.cxx11abi is True
    # a --locked install of it takes that very file, hash-checked, and compiles nothing
    locked = run_cli(
        [
            "install",
            "--profile",
            str(profile),
            "--prefix",
            str(tmp_path / "env"),
            "--verl-source",
            str(kernel_lab.repo),
            "--locked",
            "--lockfile",
            str(out),
            "--config",
            str(site(tmp_path)),
        ]
    )
    assert locked.step("standin")["status"] == "done", locked.step("standin")
    taken = kernel_wheel(env_lockfile(tmp_path / "env"))
    assert (taken.source, taken.sha256) == ("release", wheel.sha256)
    assert "g++" not in locked.log("standin")


@pytest.fixture(scope="module")
def sdist_lock(sources: Path, kernel_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kernel-stage profile locked with no declared source (as the committed GPU locks, made
    without the network to the sources): the stand-in is a locked sdist with no kernel_wheel."""
    out = tmp_path_factory.mktemp("sdist-lock") / "kernel.lock.yaml"
    lock_cpu(PROFILE, kernel_lab.repo, out)
    dist = next(
        d for s in read_lockfile(out).stages for d in s.distributions if d.name == "standin-kernel"
    )
    assert dist.source == "sdist" and dist.kernel_wheel is None, dist
    return out


def locked(verb: str, profile: Path, lock: Path, *, prefix: Path, repo: Path, config: Path) -> Run:
    """`plan` or `install` of `lock` with `profile` (its declared sources) and a site config."""
    argv = [verb, "--profile", str(profile), "--prefix", str(prefix), "--verl-source", str(repo)]
    return run_cli([*argv, "--locked", "--lockfile", str(lock), "--config", str(config)])


GAP = "not hash-checked: the prebuilt wheel kernel stage standin takes in place of the sdist"


def test_a_locked_install_takes_a_declared_sources_wheel_the_lock_does_not_pin(
    sources: Path, sdist_lock: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    config, prefix = site(tmp_path), tmp_path / "env"
    plan = locked("plan", profile, sdist_lock, prefix=prefix, repo=kernel_lab.repo, config=config)
    assert plan.code == EXIT_OK, plan.stderr
    kernel = plan.step("standin")["kernel"]
    assert (kernel["source"], kernel["origin"], kernel["trust"]) == (
        "index",
        "verl-wheelhouse",
        "project",
    ), kernel
    assert kernel["wheel"].endswith(f"/{VERL}/standin-v0.1.0/{PLAIN_NAME}")
    assert kernel["unpinned"] is True
    assert [g for g in plan.body["hash_gaps"] if g.startswith(GAP)] != [], plan.body["hash_gaps"]
    assert "hash-checked but for" in plan.body["route"]["line"]

    run = locked("install", profile, sdist_lock, prefix=prefix, repo=kernel_lab.repo, config=config)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    state = json.loads((prefix / ".verl-bootstrap" / "state.json").read_text("utf-8"))
    assert state["steps"]["standin"]["outputs"]["kernel"]["unpinned"] is True
    assert BUILD_COMMAND not in log and "g++" not in log
    served = sources / VERL / "standin-v0.1.0" / PLAIN_NAME
    # the env's lock records the wheel the lockfile did not pin: source, URL and its sha256
    wheel = kernel_wheel(env_lockfile(prefix))
    assert (wheel.source, wheel.origin, wheel.trust) == ("index", "verl-wheelhouse", "project")
    assert wheel.file == PLAIN_NAME and wheel.sha256 == file_sha256(served)
    assert wheel.url is not None and wheel.url.endswith(f"/standin-v0.1.0/{PLAIN_NAME}")
    assert wheel.key.torch == "2.13.0"


UNKEYED = "from a source whose file names state no torch or CUDA"


def test_a_wheel_whose_name_states_no_key_is_a_gap_unless_a_lock_records_its_sha256(
    sources: Path,
    sdist_lock: Path,
    kernel_lab: Lab,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """verl's wheelhouse names its wheels with no torch or CUDA: only the profile's stated key
    and the load check vouch for one, and the plan says so, until a lock records its sha256."""
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    config, prefix = site(tmp_path, "verl-wheelhouse"), tmp_path / "env"
    plan = locked("plan", profile, sdist_lock, prefix=prefix, repo=kernel_lab.repo, config=config)
    assert plan.code == EXIT_OK, plan.stderr
    [gap] = [g for g in plan.body["hash_gaps"] if g.startswith(GAP)]
    assert UNKEYED in gap and "the load check after install" in gap
    assert plan.step("standin")["kernel"]["unnamed"] == ["torch", "cuda"]
    assert "hash-checked but for" in plan.body["route"]["line"]
    # a lock made with the network to that source records the wheel's sha256: no gap is left
    monkeypatch.setenv("VERL_BOOTSTRAP_CONFIG", str(config))
    recorded = tmp_path / "recorded.lock.yaml"
    lock_cpu(profile, kernel_lab.repo, recorded)
    assert kernel_wheel(recorded).origin == "verl-wheelhouse"
    plan = locked("plan", profile, recorded, prefix=prefix, repo=kernel_lab.repo, config=config)
    assert plan.code == EXIT_OK, plan.stderr
    assert not [g for g in plan.body["hash_gaps"] if g.startswith(GAP)], plan.body["hash_gaps"]
    assert plan.step("standin")["kernel"]["unnamed"] == []


def test_a_locked_install_passes_a_wheel_that_does_not_load_to_the_next_source(
    sources: Path, sdist_lock: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    """The default route (a committed lock pinning the sdist): verl's wheelhouse serves a wheel
    built for another torch under its usual name; it is installed, fails its load check, is
    uninstalled, and the stage is installed again with the community's wheel."""
    uv = find_uv()
    assert uv is not None
    broken = build_broken_wheel(uv, kernel_lab.root / "env-a" / "bin" / "python", tmp_path)
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    config, prefix = site(tmp_path), tmp_path / "env"
    verl = sources / VERL / "standin-v0.1.0" / PLAIN_NAME
    good = verl.read_bytes()
    verl.write_bytes(broken.read_bytes())
    try:
        run = locked(
            "install", profile, sdist_lock, prefix=prefix, repo=kernel_lab.repo, config=config
        )
    finally:
        verl.write_bytes(good)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert ("verl-wheelhouse", "load-failed") in passed_over(prefix)
    assert "undefined symbol _ZN3c1023symbol_of_another_torchEi" in log
    assert BUILD_COMMAND not in log and "g++" not in log
    wheel = kernel_wheel(env_lockfile(prefix))
    assert (wheel.source, wheel.origin) == ("release", "community")
    name = COMMUNITY_NAME.format(cuda="cpu", torch="2.13")
    assert wheel.sha256 == file_sha256(sources / COMMUNITY / "v0.9.4" / name)


def test_a_locked_install_passes_a_lab_wheel_that_does_not_load_to_the_declared_sources(
    sources: Path, sdist_lock: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    """The lab wheelhouse holds a wheel keyed for the env (`wheelhouse add --key-of`) that was
    built for another torch: it is taken first, fails its load check, is uninstalled, and verl's
    wheelhouse serves the next wheel; nothing is compiled (on a host with no nvcc, a build of a
    CUDA kernel would be a refusal)."""
    uv = find_uv()
    assert uv is not None
    env_a = kernel_lab.root / "env-a"
    broken = build_broken_wheel(uv, env_a / "bin" / "python", tmp_path)
    house = tmp_path / "house"  # the site config's lab wheelhouse
    argv = ["wheelhouse", "add", str(broken), "--key-of", str(env_a), "--wheelhouse", str(house)]
    added = run_cli(argv)
    assert added.code == EXIT_OK, added.stderr
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    config, prefix = site(tmp_path), tmp_path / "env"
    run = locked("install", profile, sdist_lock, prefix=prefix, repo=kernel_lab.repo, config=config)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert ("wheelhouse", "load-failed") in passed_over(prefix)  # the lab's, before verl's
    assert "undefined symbol _ZN3c1023symbol_of_another_torchEi" in log
    assert BUILD_COMMAND not in log and "g++" not in log
    wheel = kernel_wheel(env_lockfile(prefix))
    assert (wheel.source, wheel.origin) == ("index", "verl-wheelhouse")
    assert wheel.sha256 == file_sha256(sources / VERL / "standin-v0.1.0" / PLAIN_NAME)


def test_a_site_config_that_turns_the_sources_off_builds_the_locked_sdist(
    sources: Path, sdist_lock: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    profile = lab_profile(sources, tmp_path / "profile", verl_key=STATED)
    config = site(tmp_path, "wheelhouse")  # only what the lockfile pins (and the lab's house)
    plan = locked(
        "plan", profile, sdist_lock, prefix=tmp_path / "env", repo=kernel_lab.repo, config=config
    )
    assert plan.code == EXIT_OK, plan.stderr
    kernel = plan.step("standin")["kernel"]
    assert kernel["source"] == "build", kernel
    assert planned_over(kernel) == {
        ("wheelhouse", "no-version"),
        ("verl-wheelhouse", "off"),
        ("community", "off"),
    }
    assert not [g for g in plan.body["hash_gaps"] if g.startswith(GAP)]


def test_a_wheel_of_another_key_is_not_taken_and_the_locked_sdist_is_built(
    sources: Path, sdist_lock: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    other = {"torch": "2.12.0", "cuda": "cpu", "cxx11abi": "TRUE"}
    profile = lab_profile(sources, tmp_path / "profile", verl_key=other)
    config, prefix = site(tmp_path, "verl-wheelhouse"), tmp_path / "env"
    plan = locked("plan", profile, sdist_lock, prefix=prefix, repo=kernel_lab.repo, config=config)
    assert plan.code == EXIT_OK, plan.stderr
    kernel = plan.step("standin")["kernel"]
    assert kernel["source"] == "build", kernel
    assert ("verl-wheelhouse", "other-build") in planned_over(kernel)
    assert not [g for g in plan.body["hash_gaps"] if g.startswith(GAP)]
    # the run checks again with the env's real torch, says why, and builds the locked sdist
    run = locked("install", profile, sdist_lock, prefix=prefix, repo=kernel_lab.repo, config=config)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert ("verl-wheelhouse", "other-build") in passed_over(prefix)
    assert "standin-v0.1.0/" not in log  # nothing fetched
    assert "standin.cpp -o" in log  # the compiler ran
    wheel = kernel_wheel(env_lockfile(prefix))
    assert wheel.source == "build" and wheel.origin is None
