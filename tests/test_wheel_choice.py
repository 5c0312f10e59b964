"""A locked install takes the wheel an installer would take for the lock's target.

The sglang cu130 lock allows both of soundfile 0.13.1's linux-64 wheels: the pure
`py2.py3-none-any` one and the `manylinux_2_28_x86_64` one that bundles libsndfile. The precheck
once chose the first by file name ("any" < "manylinux"), so `import sglang` failed on a host
without libsndfile, where a plain hash-checked uv install of the same lock works.
"""

from __future__ import annotations

import base64
import hashlib
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging import tags
from packaging.utils import parse_wheel_filename

from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.lock.format import LockedStage, Lockfile
from verl_bootstrap.lock.installing.lockedsteps import locked_requirements
from verl_bootstrap.lock.installing.prepare import LockedInstall, precheck
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.wheelrank import install_order, preferred, target_tags
from verl_bootstrap.machine.host.indexes import read_pip_settings
from verl_bootstrap.paths import default_lockfile
from verl_bootstrap.platforms import host_platform

SGLANG = default_lockfile("sglang", "cu130", "linux-64")
ANY = "soundfile-0.13.1-py2.py3-none-any.whl"
MANYLINUX = "soundfile-0.13.1-py2.py3-none-manylinux_2_28_x86_64.whl"
# the tests that install for real take this host's machine (x86_64 or aarch64) and its glibc
MACHINE = platform.machine()
HOST_SGLANG = default_lockfile("sglang", "cu130", host_platform())


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
    built_here = _wheel("x-1-cp312-cp312-linux_x86_64.whl")  # a lab's own build
    order = install_order([pure, newer_glibc, built_here, other_machine, abi3, own], lock)
    assert order[:4] == [own, built_here, abi3, pure]
    assert preferred([newer_glibc, pure], lock) == pure


def test_the_order_is_the_installers_own_for_this_interpreter() -> None:
    """For this host's CPython, the target's tags in the order packaging (pip's tag code) ranks
    this interpreter's: the same tags, most preferred first, but a plain `linux_` wheel, which
    uv (the installer the locked stages run) ranks last and packaging's recent releases first."""
    glibc = platform.libc_ver()[1]
    python = "{}.{}".format(*sys.version_info[:2])
    ranks = target_tags(python, host_platform(), glibc)
    ours = sorted(ranks, key=ranks.__getitem__)
    theirs = list(dict.fromkeys(tags.sys_tags()))
    plain = f"linux_{MACHINE}"
    assert [t for t in ours if t.platform != plain] == [t for t in theirs if t.platform != plain]
    assert set(ours) == set(theirs)
    for tag in (t for t in ours if t.platform == plain):  # after its (interpreter, ABI)'s manylinux
        same = (t for t in ours if (t.interpreter, t.abi) == (tag.interpreter, tag.abi))
        assert all(ranks[t] < ranks[tag] for t in same if t.platform.startswith("manylinux"))


def test_the_locked_install_takes_the_wheel_with_libsndfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real uv, the real index: the precheck of the committed lock's soundfile entry names the
    manylinux wheel, and installing its requirements file puts libsndfile in the env."""
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))  # no earlier record
    lock, stage = _soundfile_only(read_lockfile(HOST_SGLANG))
    locked = LockedInstall(lock=lock, path=HOST_SGLANG, frozen=False)
    checked = precheck(locked, read_pip_settings(), offline=False)
    assert checked.artifacts["soundfile"].filename == MANYLINUX.replace("x86_64", MACHINE)
    requirements = tmp_path / "soundfile.txt"
    requirements.write_text(locked_requirements(stage, checked.artifacts), encoding="utf-8")
    venv = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    install = [uv_binary(), "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
    install += ["--no-deps", "--require-hashes", "-r", str(requirements)]
    subprocess.run(install, check=True)
    bundled = list(venv.glob("lib/python*/site-packages/_soundfile_data/libsndfile*.so"))
    assert bundled, "the installed soundfile has no libsndfile of its own"


def _tiny_wheel(folder: Path, tag: str) -> None:
    """A real wheel of `vbtag` 1.0 tagged `tag`, whose module says which file it came from."""
    files = {
        "vbtag.py": f"TAG = {tag!r}\n",
        "vbtag-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: vbtag\nVersion: 1.0\n",
        "vbtag-1.0.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
        f"false\nTag: {tag}\n",
    }
    record = []
    with zipfile.ZipFile(folder / f"vbtag-1.0-{tag}.whl", "w") as wheel:
        for member, text in files.items():
            wheel.writestr(member, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
            record.append(f"{member},sha256={digest.rstrip(b'=').decode()},{len(text)}")
        record.append("vbtag-1.0.dist-info/RECORD,,")
        wheel.writestr("vbtag-1.0.dist-info/RECORD", "\n".join(record) + "\n")


@pytest.mark.parametrize(
    "offered",
    [
        ("py3-none-any", "py3-none-linux_{m}", "py3-none-manylinux_2_17_{m}"),
        ("py3-none-any", "py310-none-any", "py{xy}-none-any"),
        ("py3-none-manylinux2014_{m}", "py3-none-manylinux_2_28_{m}", "py3-none-any"),
    ],
)
def test_uv_takes_the_file_ranked_first(tmp_path: Path, offered: tuple[str, ...]) -> None:
    """Real uv, offered the same version in several files, installs the one ranked first."""
    glibc = platform.libc_ver()[1]
    xy = "{}{}".format(*sys.version_info[:2])
    links = tmp_path / "links"
    links.mkdir()
    for tag in offered:
        _tiny_wheel(links, tag.format(xy=xy, m=MACHINE))
    ranks = target_tags("{}.{}".format(*sys.version_info[:2]), host_platform(), glibc)
    best = min(
        links.iterdir(),
        key=lambda f: min(ranks.get(t, len(ranks)) for t in parse_wheel_filename(f.name)[3]),
    )
    venv = tmp_path / "venv"
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = [uv_binary(), "pip", "install", "-q", "--python", python, "--no-index"]
    subprocess.run([*install, "--find-links", str(links), "vbtag"], check=True)
    took = subprocess.run(
        [python, "-c", "import vbtag; print(vbtag.TAG)"], check=True, capture_output=True, text=True
    )
    assert f"vbtag-1.0-{took.stdout.strip()}.whl" == best.name
