"""`--locked` builds of sdists hash-check their build backend and build dependencies.

A real sdist (made here, built by setuptools) is built by real uv with the build env the lock
records: the locked one builds; a build dependency whose sha256 was changed, or one the lock
does not list, stops the build before anything is built.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest
from lockfixtures import CUTOFF, HOST_XY

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.cmdline import InstallRequest
from verl_bootstrap.installer.download import cached_archive
from verl_bootstrap.installer.resolve import Target
from verl_bootstrap.lock.format import (
    CondaPackage,
    CudaTarget,
    LockedDist,
    LockedSource,
    LockedStage,
    Lockfile,
)
from verl_bootstrap.lock.gaps import documented_gaps, hash_gaps
from verl_bootstrap.lock.installing.lockedsteps import write_build_constraints
from verl_bootstrap.lock.io import dump_lockfile
from verl_bootstrap.lock.making.buildlock import build_requirements, lock_build, sdist_pyproject
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import file_sha256, locked_build_file
from verl_bootstrap.run.steps import builtwheels
from verl_bootstrap.run.steps.srcbuild import build_locked_sdists

PROFILE_HASH = "sha256:" + "f" * 64  # the shape a lockfile's profile hash has

NAME = "vb-tiny"
PYPROJECT = b"""[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "vb-tiny"
version = "1.0"
"""


def _sdist(folder: Path) -> Path:
    """A real sdist: pyproject.toml, PKG-INFO and one module."""
    archive = folder / "vb_tiny-1.0.tar.gz"
    files = {
        "pyproject.toml": PYPROJECT,
        "PKG-INFO": b"Metadata-Version: 2.1\nName: vb-tiny\nVersion: 1.0\n",
        "vb_tiny.py": b"VALUE = 1\n",
    }
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"vb_tiny-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


@pytest.fixture(scope="module")
def locked_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[LockedDist, ...]]:
    """The sdist and its build env as `lock` records it (resolved on the default index)."""
    work = tmp_path_factory.mktemp("buildlock")
    archive = _sdist(work)
    requirements = build_requirements([(archive.name, sdist_pyproject(archive))])
    assert requirements == ["setuptools>=61"]
    target = Target(HOST_XY, "linux-64", CUTOFF)
    return archive, lock_build(requirements, target, IndexSettings(), work=work / "resolve")


def _build(
    tmp: Path,
    archive: Path,
    build: tuple[LockedDist, ...],
    *,
    prefix: str = "prefix",
    notes: list[str] | None = None,
) -> dict[str, Artifact]:
    sha = file_sha256(archive)
    cache, prefix_dir = tmp / "cache", tmp / prefix
    cached = cached_archive(cache, sha, archive.name)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(archive.read_bytes())
    dist = LockedDist(name=NAME, version="1.0", source="sdist", hashes=(sha,))
    stage = LockedStage(id="deps", kind="packages", distributions=(dist,), build=build)
    write_build_constraints(prefix_dir, stage)
    request = InstallRequest(
        python=Path(sys.executable), build_constraints=locked_build_file(prefix_dir, stage.id)
    )
    artifacts = {NAME: Artifact(url=cached.as_uri(), sha256=sha, kind="sdist")}
    log = tmp / "build.log"
    return build_locked_sdists(
        stage,
        artifacts,
        prefix=prefix_dir,
        request=request,
        settings=IndexSettings(),
        cache=cache,
        run=lambda argv: proc.run(argv, log_path=log),
        log=(notes if notes is not None else []).append,
    )


def test_the_lock_records_the_build_backend_with_its_hashes(
    locked_build: tuple[Path, tuple[LockedDist, ...]],
) -> None:
    _, build = locked_build
    setuptools = next(d for d in build if d.name == "setuptools")
    assert setuptools.source == "wheel" and setuptools.hashes and setuptools.version
    stage = LockedStage(id="deps", kind="packages", build=build)
    lock = Lockfile(
        generated_by="t",
        regenerate="t",
        profile="cpu",
        profile_hash=PROFILE_HASH,
        python=HOST_XY,
        verl=LockedSource(repo="r", ref="v", kind="git", commit="c" * 40),
        cuda=CudaTarget(variant="cpu"),
        backend="venv",
        stages=(stage,),
    )
    assert f"sha256:{setuptools.hashes[0]}" not in dump_lockfile(lock)  # hashes, not flags
    assert setuptools.hashes[0] in dump_lockfile(lock)


def test_a_locked_build_env_builds_the_sdist(
    locked_build: tuple[Path, tuple[LockedDist, ...]], tmp_path: Path
) -> None:
    archive, build = locked_build
    built = _build(tmp_path, archive, build)
    assert Path(built[NAME].url.removeprefix("file://")).name.endswith(".whl")
    assert "--require-build-hashes" in (tmp_path / "build.log").read_text()


def _wheel_of(built: dict[str, Artifact]) -> Path:
    return Path(built[NAME].url.removeprefix("file://"))


def test_a_second_env_takes_the_wheel_the_first_built_from_the_same_locked_sdist(
    locked_build: tuple[Path, tuple[LockedDist, ...]], tmp_path: Path
) -> None:
    archive, build = locked_build
    first = _build(tmp_path, archive, build, prefix="first")
    (tmp_path / "build.log").unlink()
    notes: list[str] = []
    second = _build(tmp_path, archive, build, prefix="second", notes=notes)
    assert not (tmp_path / "build.log").exists()  # nothing was run: no build
    assert second[NAME].sha256 == first[NAME].sha256 == file_sha256(_wheel_of(second))
    assert _wheel_of(second).is_relative_to(tmp_path / "second")  # the env's own copy
    assert len(notes) == 1 and "earlier env built from this locked sdist" in notes[0]


def test_a_kept_wheel_that_was_changed_is_built_again(
    locked_build: tuple[Path, tuple[LockedDist, ...]], tmp_path: Path
) -> None:
    archive, build = locked_build
    first = _build(tmp_path, archive, build, prefix="first")
    (kept,) = (tmp_path / "cache" / "built").glob("*/*.whl")
    kept.write_bytes(kept.read_bytes() + b"changed")
    (tmp_path / "build.log").unlink()
    second = _build(tmp_path, archive, build, prefix="second")
    assert "uv" in (tmp_path / "build.log").read_text()  # built again
    assert file_sha256(_wheel_of(second)) == second[NAME].sha256
    (kept,) = (tmp_path / "cache" / "built").glob("*/*.whl")  # the entry was replaced
    assert file_sha256(kept) == second[NAME].sha256
    assert _wheel_of(first).is_file()


def test_only_pure_wheels_are_kept(tmp_path: Path) -> None:
    compiled = tmp_path / "vb_tiny-1.0-cp311-cp311-linux_x86_64.whl"
    compiled.write_bytes(b"PK")
    key = builtwheels.build_key("a" * 64, b"", "3.11.7")
    assert not builtwheels.keep(tmp_path / "cache", key, compiled)
    assert builtwheels.kept_wheel(tmp_path / "cache", key) is None
    pure = tmp_path / "vb_tiny-1.0-py3-none-any.whl"
    pure.write_bytes(b"PK")
    assert builtwheels.keep(tmp_path / "cache", key, pure)
    assert builtwheels.kept_wheel(tmp_path / "cache", key) is not None
    # another interpreter or another locked build env is another key
    assert (
        builtwheels.kept_wheel(tmp_path / "cache", builtwheels.build_key("a" * 64, b"", "3.12.1"))
        is None
    )
    assert builtwheels.build_key("a" * 64, b"setuptools==80", "3.11.7") != key


def test_kept_wheels_in_a_folder_others_can_write_are_neither_used_nor_kept(
    tmp_path: Path,
) -> None:
    pure = tmp_path / "vb_tiny-1.0-py3-none-any.whl"
    pure.write_bytes(b"PK")
    key = builtwheels.build_key("a" * 64, b"", "3.11.7")
    assert builtwheels.keep(tmp_path / "cache", key, pure)
    folder = tmp_path / "cache" / "built"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # made private, as the bytecode store
    folder.chmod(0o777)  # anyone could have put a wheel and its sha256 there
    assert builtwheels.kept_wheel(tmp_path / "cache", key) is None
    assert not builtwheels.keep(tmp_path / "cache", key, pure)
    folder.chmod(0o700)
    (entry,) = folder.iterdir()
    (entry / pure.name).chmod(0o666)  # one file others can write is enough to refuse the entry
    assert builtwheels.kept_wheel(tmp_path / "cache", key) is None


NOBODY = 65534  # the second real user (CI runs as root, which can become it with setpriv)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="two real users need root (to become the second one with setpriv), as in CI",
)
def test_a_second_user_neither_uses_nor_writes_the_first_users_kept_wheels() -> None:
    shared = Path(tempfile.mkdtemp(prefix="vb-kept-", dir="/tmp"))  # both users reach it
    try:
        shared.chmod(0o755)
        pure = shared / "vb_tiny-1.0-py3-none-any.whl"
        pure.write_bytes(b"PK")
        pure.chmod(0o644)
        key = builtwheels.build_key("a" * 64, b"", "3.11.7")
        assert builtwheels.keep(shared / "cache", key, pure)  # the first user's (root's)
        (shared / "cache").chmod(0o755)
        probe = (
            "import sys; from pathlib import Path;"
            "from verl_bootstrap.run.steps import builtwheels as b;"
            "c, k, w = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]);"
            "print(b.kept_wheel(c, k), b.keep(c, k, w))"
        )
        argv = [sys.executable, "-c", probe, str(shared / "cache"), key, str(pure)]
        done = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            check=False,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["None", "False"]  # no error: a build, as with no cache
        assert builtwheels.kept_wheel(shared / "cache", key) is not None  # the first user's stays
    finally:
        shutil.rmtree(shared)


def _tampered(dist: LockedDist) -> LockedDist:
    """`dist` with the last digit of each sha256 changed."""
    hashes = tuple(h[:-1] + ("0" if h[-1] != "0" else "1") for h in dist.hashes)
    return dist.model_copy(update={"hashes": hashes})


def test_a_tampered_build_dependency_is_refused(
    locked_build: tuple[Path, tuple[LockedDist, ...]], tmp_path: Path
) -> None:
    archive, build = locked_build
    tampered = tuple(_tampered(d) if d.name == "setuptools" else d for d in build)
    with pytest.raises(CommandFailed):
        _build(tmp_path, archive, tampered)
    log = (tmp_path / "build.log").read_text()
    assert "Hash mismatch" in log and "setuptools" in log
    assert not list((tmp_path / "prefix").rglob("*.whl"))


def test_a_build_dependency_the_lock_does_not_list_is_refused(
    locked_build: tuple[Path, tuple[LockedDist, ...]], tmp_path: Path
) -> None:
    archive, build = locked_build
    other = LockedDist(name="wheel", version="0.45.1", source="wheel", hashes=("0" * 64,))
    with pytest.raises(CommandFailed):
        _build(tmp_path, archive, (*(d for d in build if d.name != "setuptools"), other))
    said = " ".join((tmp_path / "build.log").read_text().split())  # uv wraps its long lines
    assert "no trusted hash was provided for: `setuptools`" in said


def _lock(*stages: LockedStage, verl: str = "git", conda: bool = False) -> Lockfile:
    source = (
        LockedSource(repo="r", ref="v1", kind="git", commit="c" * 40)
        if verl == "git"
        else LockedSource(
            repo="r", ref="v1", kind="sdist", sdist="verl-1.tar.gz", sdist_sha256="a" * 64
        )
    )
    packages = (
        (
            CondaPackage(
                name="python",
                version="3.12.1",
                build="h0",
                channel="c",
                subdir="linux-64",
                filename="python-3.12.1-h0.conda",
                sha256="b" * 64,
            ),
        )
        if conda
        else ()
    )
    return Lockfile(
        generated_by="t",
        regenerate="t",
        profile="cpu",
        profile_hash=PROFILE_HASH,
        python=HOST_XY,
        verl=source,
        cuda=CudaTarget(variant="cpu"),
        backend="conda" if conda else "venv",
        stages=stages,
        conda=packages,
    )


SETUPTOOLS = LockedDist(name="setuptools", version="80.0", source="wheel", hashes=("d" * 64,))
VERL = LockedStage(
    id="install-verl",
    kind="install-verl",
    distributions=(LockedDist(name="verl", version="1", source="editable"),),
)
DEPS = LockedStage(
    id="verl-deps",
    kind="verl-deps",
    distributions=(LockedDist(name="antlr", version="4", source="sdist", hashes=("e" * 64,)),),
)


def test_a_lock_with_every_build_env_locked_names_only_the_git_checkout() -> None:
    locked = (
        VERL.model_copy(update={"build": (SETUPTOOLS,)}),
        DEPS.model_copy(update={"build": (SETUPTOOLS,)}),
    )
    assert hash_gaps(_lock(*locked), installer="uv", conda_exe=False) == [
        "not hash-checked: verl's own source (its git checkout, installed editable), checked by "
        "its commit id, which must be the locked one"
    ]
    assert hash_gaps(_lock(*locked, verl="sdist"), installer="uv", conda_exe=False) == []
    pip = hash_gaps(_lock(*locked, verl="sdist"), installer="pip", conda_exe=False)
    assert len(pip) == 2 and all("pip cannot require hashes" in g for g in pip)
    assert "verl's editable install" in pip[0] and "verl-deps's source builds (antlr)" in pip[1]


def test_a_lock_without_build_envs_names_each_build_and_how_to_close_it() -> None:
    gaps = hash_gaps(_lock(VERL, DEPS, verl="sdist"), installer="uv", conda_exe=False)
    assert len(gaps) == 2 and all("regenerate it with `verl-bootstrap lock`" in g for g in gaps)
    isolated = DEPS.model_copy(update={"options": ("--no-deps", "--no-build-isolation")})
    assert len(hash_gaps(_lock(VERL, isolated, verl="sdist"), installer="uv", conda_exe=False)) == 1


def test_conda_packages_are_a_gap_only_under_the_users_own_conda() -> None:
    lock = _lock(verl="sdist", conda=True)
    assert hash_gaps(lock, installer="uv", conda_exe=False) == []
    (line,) = hash_gaps(lock, installer="uv", conda_exe=True)
    assert line.startswith("not hash-checked: the conda packages")


def test_the_security_page_lists_every_gap_the_plan_can_name() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    flat = " ".join(page.split())
    for line in documented_gaps():
        assert line in flat, line
