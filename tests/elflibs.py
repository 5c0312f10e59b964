"""Real ELF shared libraries for the native-link tests, built here with gcc and a linker version
script: a provider of `greet@GREET_1` (its old release) or of `greet` and `wave` at `GREET_1`
(its new one, the same SONAME), and a user linked against the new one, which so needs both.
Beside them, CUDA-named ones (`Cuda`), and the wheels, envs and locks the tests put them in."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from packaging.utils import parse_wheel_filename

from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import default_lockfile, file_sha256

SONAME = "libgreet.so.1"
VERSION = "GREET_1"


@dataclass(frozen=True)
class Built:
    """The libraries: the old provider, the new one (each as libgreet.so.1 in its own folder)
    and the user of the new one."""

    old: Path
    new: Path
    user: Path


def gcc() -> str:
    found = shutil.which("gcc")
    if found is None:
        pytest.fail("gcc is needed to build the test's libraries (make test-deps installs it)")
    return found


def _library(folder: Path, name: str, source: str, *extra: str, file: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.c").write_text(source, encoding="utf-8")
    out = folder / (file or (SONAME if name == "greet" else f"lib{name}.so"))
    argv = [gcc(), "-shared", "-fPIC", "-o", str(out), str(folder / f"{name}.c"), *extra]
    subprocess.run(argv, check=True)
    return out


def _provider(folder: Path, symbols: tuple[str, ...]) -> Path:
    script = folder / "greet.map"
    folder.mkdir(parents=True, exist_ok=True)
    script.write_text(f"{VERSION} {{ global: {'; '.join(symbols)}; local: *; }};\n")
    source = "".join(f"int {s}(void) {{ return {n}; }}\n" for n, s in enumerate(symbols, 1))
    flags = (f"-Wl,--version-script={script}", f"-Wl,-soname,{SONAME}")
    return _library(folder, "greet", source, *flags)


def build(root: Path) -> Built:
    """The three libraries under `root`."""
    old = _provider(root / "old", ("greet",))
    new = _provider(root / "new", ("greet", "wave"))
    user_source = "int greet(void); int wave(void);\nint hello(void) { return greet() + wave(); }\n"
    user = _library(root / "user", "user", user_source, f"-L{new.parent}", "-l:" + SONAME)
    return Built(old, new, user)


@dataclass(frozen=True)
class Cuda:
    """CUDA-named libraries: cuBLASLt as CUDA 12 and CUDA 13 ship it (`libcublasLt.so.12`,
    `libcublasLt.so.13`), a core built against the CUDA 12 one that also needs the driver
    (`libcuda.so.1`, a stand-in built here, as a host carries it), one that needs cuDNN's
    `libcudnn.so.9` and `libcudnn_ops.so.9` beside that cuBLASLt, one build per CUDA major of
    one module (`hook_cu12`, `hook_cu13`, as torch-memory-saver ships them), and a user of a
    copy a wheel's repair renamed (`libcudart.faf08d9a.so.13`, its SONAME `libcudart.so.13`)."""

    lt12: Path
    lt13: Path
    driver: Path
    core: Path
    cudnn_user: Path
    hooks: tuple[Path, Path]
    cudart_copy: Path
    copy_user: Path


def _named(folder: Path, soname: str, file: str = "") -> Path:
    source = f"int {soname.split('.', maxsplit=1)[0]}_create(void) {{ return 0; }}\n"
    flags = (f"-Wl,-soname,{soname}",)
    return _library(folder, soname.split(".", maxsplit=1)[0], source, *flags, file=file or soname)


def _user(folder: Path, name: str, *providers: Path) -> Path:
    calls = " + ".join(f"{p.name.split('.')[0]}_create()" for p in providers)
    source = "".join(f"int {p.name.split('.')[0]}_create(void);\n" for p in providers)
    source += f"int {name}_run(void) {{ return {calls}; }}\n"
    links = [f for p in providers for f in (f"-L{p.parent}", f"-l:{p.name}")]
    return _library(folder, name, source, *links)


def build_cuda(root: Path) -> Cuda:
    """The libraries under `root`, each in its own folder."""
    lt12 = _named(root / "cu12", "libcublasLt.so.12")
    lt13 = _named(root / "cu13", "libcublasLt.so.13")
    driver = _named(root / "driver", "libcuda.so.1")
    core = _user(root / "core", "core", lt12, driver)
    cudnn = [_named(root / "cudnn", f"{name}.so.9") for name in ("libcudnn", "libcudnn_ops")]
    cudnn_user = _user(root / "attention", "attention", *cudnn, lt12)
    hooks = (_user(root / "hooks", "hook_cu12", lt12), _user(root / "hooks", "hook_cu13", lt13))
    # linked against the renamed file (its name as the SONAME, as the repair leaves the need);
    # the copy shipped beside it keeps CUDA's own SONAME
    renamed = _named(root / "link", "libcudart.faf08d9a.so.13")
    copy_user = _user(root / "copyuser", "image", renamed)
    cudart_copy = _named(root / "copy", "libcudart.so.13", file=renamed.name)
    return Cuda(lt12, lt13, driver, core, cudnn_user, hooks, cudart_copy, copy_user)


def wheel_of(folder: Path, name: str, libraries: dict[str, Path]) -> Path:
    """A platform wheel holding `libraries` (path in the wheel -> file), as the index's are."""
    wheel = folder / f"{name}-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for inside, path in libraries.items():
            archive.write(path, inside)
        archive.writestr(f"{name}-1.0.dist-info/METADATA", f"Name: {name}\nVersion: 1.0\n")
    return wheel


def env_with(prefix: Path, dists: dict[str, dict[str, Path]]) -> Path:
    """A real venv at `prefix` whose site-packages holds each distribution's libraries (path
    under site-packages -> file), each recorded by its RECORD, as a wheel install leaves them."""
    subprocess.run([uv_binary(), "venv", "-q", str(prefix)], check=True)
    (site,) = prefix.glob("lib/python3*/site-packages")
    for dist, libraries in dists.items():
        for inside, path in libraries.items():
            (site / inside).parent.mkdir(parents=True, exist_ok=True)
            (site / inside).write_bytes(path.read_bytes())
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        record = "".join(f"{inside},,\n" for inside in libraries)
        (info / "RECORD").write_text(f"{record}{dist}-1.0.dist-info/METADATA,,\n")
    return prefix


def lock_of(folder: Path, wheels: list[Path]) -> Lockfile:
    """The cpu lockfile with one stage holding `wheels` (each its sha256, from find-links)."""
    data = yaml.safe_load(default_lockfile("cpu", "cpu", "linux-64").read_text(encoding="utf-8"))
    dists = []
    for wheel in wheels:
        name, version, _, _ = parse_wheel_filename(wheel.name)
        dist = {"name": str(name), "version": str(version), "source": "wheel"}
        dists.append({**dist, "hashes": [file_sha256(wheel)], "index": "find-links"})
    stage = {"id": "native", "kind": "packages", "distributions": dists, "env": {}, "options": []}
    data["stages"] = [data["stages"][0], stage]
    data["exclude_newer"] = None
    path = folder / "native.lock.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return read_lockfile(path)
