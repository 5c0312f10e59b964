"""A source's whole wheel in place of the locked parts it holds, for real on loopback.

TransformerEngine is locked from the default index as three parts: the meta-package, its core
library wheel and its torch extension (an sdist, a source build). verl's wheelhouse has one
whole wheel of the meta-package's name that holds all three. The stand-ins here have that shape:
standin-meta (a pure wheel needing the other two), standin-core (a pure wheel writing a file
into standin_meta/, as TransformerEngine's core writes into transformer_engine/) and the
stand-in kernel's sdist; the whole wheel is standin-meta built for the env's key, holding the
kernel's compiled module (built once by the kernel lab) and the core's file. `lock` with the
sources records it (URL, sha256, what it holds) on the kernel; a lockfile's install takes it in
place of the three (hash-checked where the lock records it, key-checked and recorded where it
does not), installs no core and compiles nothing, records what it did, and `verify --against`
accepts exactly that swap.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kernellab import PROFILE, Lab, lock_cpu, write_profile
from loopback import base_url, serve_wheelhouse
from scaffold import Run, run_cli
from test_kernels_prebuilt import BUILD_COMMAND, STATED, locked, site
from uv import find_uv_bin

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.lock.bundle.bundlekernels import collect_kernel_wheels
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import env_lockfile, file_sha256, locked_requirements_file

VERL = "verl-project/verl-wheelhouse/releases/download"
WHOLE = "standin_meta-0.1.0-cp311-cp311-linux_x86_64.whl"
HELD = ["standin-core", "standin-kernel"]


def make_wheel(
    dest: Path, name: str, files: dict[str, bytes], *, requires: tuple[str, ...] = ()
) -> Path:
    """A wheel at `dest` (its file name states name, version and tags) holding `files`, with a
    METADATA, WHEEL and RECORD an installer accepts."""
    dist, version, tag = dest.name[: -len(".whl")].split("-", 2)
    info = f"{dist}-{version}.dist-info"
    pure = tag == "py3-none-any"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    wheel = f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: {str(pure).lower()}\n"
    wheel += f"Tag: {tag}\n"
    members = {**files, f"{info}/METADATA": meta.encode(), f"{info}/WHEEL": wheel.encode()}
    rows = []
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for member, data in members.items():
            out.writestr(member, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            rows.append(f"{member},sha256={digest.decode()},{len(data)}")
        out.writestr(f"{info}/RECORD", "\n".join([*rows, f"{info}/RECORD,,"]) + "\n")
    return dest


def kernel_files(kernel_lab: Lab) -> dict[str, bytes]:
    """The stand-in kernel's package files from the wheel the lab built (no .dist-info)."""
    built = next(kernel_lab.wheelhouse.glob("*.whl"))
    with zipfile.ZipFile(built) as wheel:
        return {n: wheel.read(n) for n in wheel.namelist() if ".dist-info/" not in n}


@pytest.fixture(scope="module")
def whole_lab(kernel_lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The loopback host's folder (its URL in `base`), the parts on a find-links folder
    (`links`), the profile (`profile/profile.yaml`) and two locks of it: made with the sources
    (`kernel.lock.yaml`, recording the whole wheel) and with them turned off (`gap.lock.yaml`,
    recording no wheel, as the committed GPU locks made without the network to GitHub)."""
    root = tmp_path_factory.mktemp("whole")
    links = root / "links"
    make_wheel(
        links / "standin_meta-0.1.0-py3-none-any.whl",
        "standin-meta",
        {"standin_meta/__init__.py": b"PART = 'meta'\n"},
        requires=("standin-core==0.1.0", "standin-kernel==0.1.0"),
    )
    core = {"standin_meta/core.py": b"WHERE = 'core wheel'\n"}
    make_wheel(links / "standin_core-0.1.0-py3-none-any.whl", "standin-core", core)
    whole_files = {
        **kernel_files(kernel_lab),
        "standin_meta/__init__.py": b"PART = 'meta'\n",
        "standin_meta/core.py": b"WHERE = 'whole wheel'\n",
    }
    make_wheel(root / VERL / "standin-meta-v0.1.0" / WHOLE, "standin-meta", whole_files)
    server = serve_wheelhouse(root, "standin-meta", f"{VERL}/standin-meta-v0.1.0/{WHOLE}")
    base = base_url(server)
    profile = _profile(root / "profile", base)
    with kernel_lab.environment(), pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_FIND_LINKS", f"{os.environ['PIP_FIND_LINKS']} {links}")
        lock_cpu(profile, kernel_lab.repo, root / "kernel.lock.yaml")
        off = root / "sources-off.yaml"
        off.write_text("schema_version: 1\nkernel_sources: [wheelhouse]\n")
        patch.setenv("VERL_BOOTSTRAP_CONFIG", str(off))
        lock_cpu(profile, kernel_lab.repo, root / "gap.lock.yaml")
        patch.delenv("VERL_BOOTSTRAP_CONFIG")
        yield root
    server.shutdown()


def _profile(folder: Path, base: str) -> Path:
    """The kernel-stage profile installing the meta-package, its whole wheel declared."""
    profile = yaml.safe_load(PROFILE.read_text())
    stage = profile["stages"][1]
    stage.update(packages=["standin-meta==0.1.0"], expect={"standin-meta": "==0.1.0"})
    stage["kernel"]["sources"] = [
        {
            "id": "verl-wheelhouse",
            "trust": "project",
            "index": f"{base}/verl-wheelhouse/simple/",
            "key": STATED,
            "distribution": "standin-meta",
            "replaces": ["standin-core"],
        }
    ]
    profile["verify"]["imports"] = ["standin_kernel", "standin_meta.core"]
    wheels = [f"{base}/{VERL}/standin-meta-v0.1.0/{WHOLE}"]
    recorded = {"verl-wheelhouse": {"from": "its index", "wheels": wheels}}
    return write_profile(folder, profile, recorded)


def _run(
    verb: str, root: Path, kernel_lab: Lab, tmp_path: Path, *order: str, lock: str = "gap"
) -> Run:
    return locked(
        verb,
        root / "profile" / "profile.yaml",
        root / f"{lock}.lock.yaml",
        prefix=tmp_path / "env",
        repo=kernel_lab.repo,
        config=site(tmp_path, *order),
    )


def test_a_lock_records_the_whole_wheel_on_the_kernel_with_what_it_holds(whole_lab: Path) -> None:
    """The lock holds the index's three parts; made with the sources, it records the whole
    wheel (URL, source, sha256 of the file downloaded) on the kernel's distribution."""
    for name in ("kernel", "gap"):
        stage = next(
            s for s in read_lockfile(whole_lab / f"{name}.lock.yaml").stages if s.id == "standin"
        )
        sources = {d.name: d.source for d in stage.distributions}
        assert sources == {
            "standin-core": "wheel",
            "standin-kernel": "sdist",
            "standin-meta": "wheel",
        }
    gap = read_lockfile(whole_lab / "gap.lock.yaml").distributions()
    assert all(d.kernel_wheel is None for d in gap.values())
    dists = read_lockfile(whole_lab / "kernel.lock.yaml").distributions()
    wheel = dists["standin-kernel"].kernel_wheel
    served = whole_lab / VERL / "standin-meta-v0.1.0" / WHOLE
    assert wheel is not None and wheel.file == WHOLE and wheel.sha256 == file_sha256(served)
    assert (wheel.source, wheel.origin, wheel.trust) == ("index", "verl-wheelhouse", "project")
    assert wheel.url is not None and wheel.url.endswith(f"/{VERL}/standin-meta-v0.1.0/{WHOLE}")
    assert (wheel.distribution, wheel.replaces) == ("standin-meta", tuple(HELD))
    assert dists["standin-meta"].kernel_wheel is None


def test_a_locked_install_takes_the_whole_wheel_the_lock_records_hash_checked(
    whole_lab: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    plan = _run("plan", whole_lab, kernel_lab, tmp_path, lock="kernel")
    assert plan.code == EXIT_OK, plan.stderr
    step = plan.step("standin")
    assert step["kernel"]["reason"].startswith("prebuilt release wheel the lockfile records")
    assert (
        "a whole standin-meta wheel, installed in place of the locked standin-meta"
        in (step["kernel"]["reason"])
    )
    assert step["description"].startswith(
        "1 of its 3 locked distribution(s), hash-checked, the kernel's whole standin-meta wheel "
        "among them, installed in place of the locked standin-meta, with standin-core, "
        "standin-kernel left out: it holds them"
    ), step["description"]
    assert not [g for g in plan.body["hash_gaps"] if "kernel stage standin" in g]
    run = _run("install", whole_lab, kernel_lab, tmp_path, lock="kernel")
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert "no compiler ran" in log and BUILD_COMMAND not in log and "g++" not in log
    prefix = tmp_path / "env"
    assert not set(HELD) & set(installed(prefix))
    assert _against(prefix) == (0, [])


def test_a_whole_wheel_that_is_not_the_recorded_file_is_refused(
    whole_lab: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    """The source now serves other bytes under the recorded name: the stage fails, naming the
    sha256 the lockfile records, and installs nothing of the stage."""
    served = whole_lab / VERL / "standin-meta-v0.1.0" / WHOLE
    original = served.read_bytes()
    try:
        with zipfile.ZipFile(served, "a") as wheel:
            wheel.writestr("standin_meta/extra.py", b"")
        run = _run("install", whole_lab, kernel_lab, tmp_path, lock="kernel")
    finally:
        served.write_bytes(original)
    step = run.step("standin")
    assert run.code != EXIT_OK and step["status"] == "failed", step
    recorded = read_lockfile(whole_lab / "kernel.lock.yaml").distributions()["standin-kernel"]
    assert recorded.kernel_wheel is not None
    assert f"does not have the sha256 the lockfile names ({recorded.kernel_wheel.sha256})" in (
        step["reason"] + run.stderr
    ), (step, run.stderr)
    assert "standin-meta" not in installed(tmp_path / "env")


def test_a_locked_install_takes_the_whole_wheel_in_place_of_the_parts_it_holds(
    whole_lab: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    plan = _run("plan", whole_lab, kernel_lab, tmp_path)
    assert plan.code == EXIT_OK, plan.stderr
    step = plan.step("standin")
    kernel = step["kernel"]
    assert (kernel["source"], kernel["origin"], kernel["trust"]) == (
        "index",
        "verl-wheelhouse",
        "project",
    ), kernel
    assert kernel["wheel"].endswith(f"/{VERL}/standin-meta-v0.1.0/{WHOLE}")
    said = (
        "a whole standin-meta wheel, installed in place of the locked standin-meta, with the "
        "locked standin-core and standin-kernel left out (it holds them)"
    )
    assert said in kernel["reason"], kernel["reason"]
    assert step["description"].startswith(
        "1 of its 3 locked distribution(s), hash-checked but for the kernel's whole standin-meta "
        "wheel (a hash gap, above), installed in place of the locked standin-meta, with "
        "standin-core, standin-kernel left out: it holds them"
    ), step["description"]

    run = _run("install", whole_lab, kernel_lab, tmp_path)
    # (the run ends non-zero at verify's `pip check`: this profile installs verl without its
    # requirements, as every kernel-lab env does; what verify imports is checked below)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    assert "no compiler ran" in log and BUILD_COMMAND not in log and "g++" not in log
    served = whole_lab / VERL / "standin-meta-v0.1.0" / WHOLE
    assert f"has sha256 {file_sha256(served)}" in log
    prefix = tmp_path / "env"
    requirements = locked_requirements_file(prefix, "standin").read_text()
    assert "# standin-core: left out, the whole kernel wheel below holds it" in requirements
    assert "standin-core @" not in requirements and "standin-kernel @" not in requirements
    assert "standin-meta @ file:" in requirements and f"/{WHOLE} \\\n" in requirements
    assert f"--hash=sha256:{file_sha256(served)}" in requirements
    # the env holds the whole wheel and neither part; the core's file is the whole wheel's
    now = installed(prefix)
    assert "standin-meta" in now and not set(HELD) & set(now), sorted(now)
    where = subprocess.run(
        [str(env_python(prefix)), "-c", "import standin_meta.core as c; print(c.WHERE)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where == "whole wheel"
    imported = '{"module": "standin_meta.core", "ok": true'
    assert imported in run.log("verify") and '"module": "standin_kernel", "ok": true' in (
        run.log("verify")
    )
    # the env's lock names the wheel (source, URL, sha256) and what it holds
    record = read_lockfile(env_lockfile(prefix)).distributions()
    wheel = record["standin-meta"].kernel_wheel
    assert wheel is not None and wheel.file == WHOLE and wheel.sha256 == file_sha256(served)
    assert (wheel.source, wheel.origin, wheel.trust) == ("index", "verl-wheelhouse", "project")
    assert [record[n].replaced_by for n in HELD] == ["standin-meta", "standin-meta"]
    assert record["standin-meta"].replaced_by is None

    # verify --against (the lockfile the env came from) accepts exactly that swap
    assert _against(prefix) == (0, [])
    said = run_cli(["verify", "--prefix", str(prefix), "--against"]).body["held_by_whole_wheels"]
    assert said == dict.fromkeys(HELD, "standin-meta")
    # and it can fail: without the whole wheel, the parts it held are missing again
    uninstall = [find_uv_bin(), "pip", "uninstall", "--python", str(env_python(prefix))]
    uninstall.append("standin-meta")
    subprocess.run(uninstall, check=True, capture_output=True)
    code, differences = _against(prefix)
    assert code == 1 and differences == [
        ("missing", "standin-core"),
        ("missing", "standin-kernel"),
        ("missing", "standin-meta"),
    ], differences


def test_with_the_sources_turned_off_the_parts_install_and_the_extension_builds(
    whole_lab: Path, kernel_lab: Lab, tmp_path: Path
) -> None:
    """A site config trusting only its own wheelhouse: the locked parts, the sdist built."""
    plan = _run("plan", whole_lab, kernel_lab, tmp_path, "wheelhouse")
    assert plan.code == EXIT_OK, plan.stderr
    kernel = plan.step("standin")["kernel"]
    assert kernel["source"] == "build" and "kernel_sources turns off" in kernel["reason"]
    assert not plan.step("standin")["description"].startswith("1 of its 3")


def _against(prefix: Path) -> tuple[int, list[tuple[str, str]]]:
    """`verify --against` with the lockfile the env came from: exit code, differences."""
    got = run_cli(["verify", "--prefix", str(prefix), "--against"])
    return got.code, [(d["kind"], d["name"]) for d in got.body["differences"]]


def test_a_bundle_of_the_lock_carries_the_whole_wheel_it_records(
    whole_lab: Path, tmp_path: Path
) -> None:
    """What `bundle` collects for this lock: the whole wheel, downloaded and checked by its
    recorded sha256 (an install from the bundle then takes it by sha256, as any kernel wheel)."""
    lock = read_lockfile(whole_lab / "kernel.lock.yaml")
    carried, notes = collect_kernel_wheels(lock, cache=tmp_path / "c", house=None, work=tmp_path)
    served = whole_lab / VERL / "standin-meta-v0.1.0" / WHOLE
    assert notes == [] and [(c.path.name, c.sha256) for c in carried] == [
        (WHOLE, file_sha256(served))
    ]
