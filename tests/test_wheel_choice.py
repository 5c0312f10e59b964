"""A locked install takes the wheel an installer would take for the lock's target.

The sglang cu130 lock allows both of soundfile 0.13.1's linux-64 wheels: the pure
`py2.py3-none-any` one and the `manylinux_2_28_x86_64` one that bundles libsndfile. The precheck
once chose the first by file name ("any" < "manylinux"), so `import sglang` failed on a host
without libsndfile, where a plain hash-checked uv install of the same lock works.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest
from packaging import tags

from verl_bootstrap.host.indexes import read_pip_settings
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.lookup import Artifact
from verl_bootstrap.installer.wheelrank import install_order, preferred, target_tags
from verl_bootstrap.lockfile.io import read_lockfile
from verl_bootstrap.lockfile.model import LockedStage, Lockfile
from verl_bootstrap.lockinstall.install import locked_requirements
from verl_bootstrap.lockinstall.prepare import LockedInstall, precheck
from verl_bootstrap.paths import default_lockfile

SGLANG = default_lockfile("sglang", "cu130", "linux-64")
ANY = "soundfile-0.13.1-py2.py3-none-any.whl"
MANYLINUX = "soundfile-0.13.1-py2.py3-none-manylinux_2_28_x86_64.whl"


def _wheel(name: str, kind: str = "wheel") -> Artifact:
    return Artifact(url=f"https://index.example/files/{name}", sha256="0" * 64, kind=kind)


def _soundfile_only(lock: Lockfile) -> tuple[Lockfile, LockedStage]:
    """The committed sglang lock cut down to its soundfile entry, as locked."""
    for stage in lock.stages:
        kept = tuple(d for d in stage.distributions if d.name == "soundfile")
        if kept:
            narrowed = stage.model_copy(update={"distributions": kept})
            return lock.model_copy(update={"stages": (narrowed,)}), narrowed
    raise AssertionError("the sglang lock no longer holds soundfile")


def test_the_platform_wheel_comes_before_the_pure_one() -> None:
    lock = read_lockfile(SGLANG)
    files = [_wheel(ANY), _wheel(MANYLINUX), _wheel("soundfile-0.13.1.tar.gz", "sdist")]
    assert [a.filename for a in install_order(files, lock)] == [
        MANYLINUX,
        ANY,
        "soundfile-0.13.1.tar.gz",
    ]


def test_wheels_the_target_cannot_take_come_last() -> None:
    lock = read_lockfile(SGLANG)  # CPython 3.12, x86_64, glibc 2.34
    newer_glibc = _wheel("x-1-cp312-cp312-manylinux_2_39_x86_64.whl")
    other_machine = _wheel("x-1-cp312-cp312-manylinux_2_28_aarch64.whl")
    abi3 = _wheel("x-1-cp39-abi3-manylinux2014_x86_64.whl")
    own = _wheel("x-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    pure = _wheel("x-1-py3-none-any.whl")
    order = install_order([pure, newer_glibc, other_machine, abi3, own], lock)
    assert order[:3] == [own, abi3, pure]
    assert preferred([newer_glibc, pure], lock) == pure


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="CPython's tags")
def test_the_order_is_the_installers_own_for_this_interpreter() -> None:
    """For this host's CPython, the target's tags in the order packaging (pip's tag code) ranks
    this interpreter's: the same tags, most preferred first."""
    libc, glibc = platform.libc_ver()
    machine = platform.machine()
    if libc != "glibc" or machine not in ("x86_64", "aarch64"):
        pytest.skip("a glibc Linux host on x86_64 or aarch64")
    python = "{}.{}".format(*sys.version_info[:2])
    ours = target_tags(python, f"linux-{machine}".replace("linux-x86_64", "linux-64"), glibc)
    assert sorted(ours, key=ours.__getitem__) == list(dict.fromkeys(tags.sys_tags()))


@pytest.mark.skipif(platform.machine() != "x86_64", reason="installs an x86_64 wheel")
def test_the_locked_install_takes_the_wheel_with_libsndfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real uv, the real index: the precheck of the committed lock's soundfile entry names the
    manylinux wheel, and installing its requirements file puts libsndfile in the env."""
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))  # no earlier record
    lock, stage = _soundfile_only(read_lockfile(SGLANG))
    locked = LockedInstall(lock=lock, path=SGLANG, frozen=False)
    checked = precheck(locked, read_pip_settings(), offline=False)
    assert checked.artifacts["soundfile"].filename == MANYLINUX
    requirements = tmp_path / "soundfile.txt"
    requirements.write_text(locked_requirements(stage, checked.artifacts), encoding="utf-8")
    venv = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    install = [uv_binary(), "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
    install += ["--no-deps", "--require-hashes", "-r", str(requirements)]
    subprocess.run(install, check=True)
    bundled = list(venv.glob("lib/python*/site-packages/_soundfile_data/libsndfile*.so"))
    assert bundled, "the installed soundfile has no libsndfile of its own"
