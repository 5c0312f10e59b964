"""Foreign CUDA libraries: copies of cuDNN, NCCL, cuBLAS or the CUDA runtime outside the env.

A system cuDNN on the load path can shadow the one torch's wheels ship and crash at import or at
the first convolution. Before an install we look where the loader looks (LD_LIBRARY_PATH,
ld.so.conf.d) and where toolkits live (CUDA_HOME, CUDNN_HOME); after it, /proc/<pid>/maps of a
process that imported torch says which file each library really came from.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LIB_PATTERNS",
    "ForeignLib",
    "LoadedLib",
    "find_foreign_libs",
    "ld_so_conf_dirs",
    "lib_family",
    "loaded_libs",
]

LIB_PATTERNS = ("libcudnn*.so*", "libnccl*.so*", "libcublas*.so*", "libcudart*.so*")
_LD_CONF = Path("etc/ld.so.conf.d")


@dataclass(frozen=True)
class ForeignLib:
    """A CUDA library file found outside any env, and how the loader would come to it."""

    path: Path
    origin: str  # "LD_LIBRARY_PATH", "/etc/ld.so.conf.d/cuda.conf", "CUDA_HOME", "CUDNN_HOME"
    on_load_path: bool  # LD_LIBRARY_PATH and ld.so.conf.d are searched; the *_HOME dirs are not


@dataclass(frozen=True)
class LoadedLib:
    """A CUDA library mapped into a process, and whether it came from inside the env."""

    name: str  # "libcudnn.so.9"
    path: Path
    inside_prefix: bool


def lib_family(name: str) -> str | None:
    """'libcudnn_ops.so.9' -> 'libcudnn'; None for a library we do not watch."""
    for pattern in LIB_PATTERNS:
        if fnmatch.fnmatch(name, pattern):
            return pattern.split("*", 1)[0]
    return None


def _libs_in(folder: Path) -> list[Path]:
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except OSError:
        return []
    return [folder / name for name in names if lib_family(name)]


def ld_so_conf_dirs(root: Path) -> list[tuple[Path, str]]:
    """Folders listed in <root>/etc/ld.so.conf.d/*.conf, each with the file that lists it."""
    found: list[tuple[Path, str]] = []
    for conf in sorted((root / _LD_CONF).glob("*.conf")):
        try:
            lines = conf.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            entry = line.split("#", 1)[0].strip()
            # `include` lines are rare in conf.d; only plain absolute folders are followed.
            if entry.startswith("/"):
                found.append((root / entry.lstrip("/"), f"/{_LD_CONF}/{conf.name}"))
    return found


def _search_dirs(root: Path, environ: Mapping[str, str]) -> list[tuple[Path, str, bool]]:
    dirs = [
        (Path(entry), "LD_LIBRARY_PATH", True)
        for entry in environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
        if entry
    ]
    dirs += [(folder, origin, True) for folder, origin in ld_so_conf_dirs(root)]
    if environ.get("CUDA_HOME"):
        dirs.append((Path(environ["CUDA_HOME"]) / "lib64", "CUDA_HOME", False))
    if environ.get("CUDNN_HOME"):
        home = Path(environ["CUDNN_HOME"])
        dirs += [(home / sub, "CUDNN_HOME", False) for sub in ("lib", "lib64")]
    return dirs


def find_foreign_libs(*, root: Path, environ: Mapping[str, str]) -> tuple[ForeignLib, ...]:
    """Every watched CUDA library in the folders the loader searches or toolkits name."""
    found: dict[Path, ForeignLib] = {}
    for folder, origin, on_path in _search_dirs(root, environ):
        for path in _libs_in(folder):
            if path not in found:  # the first origin wins: the loader searches in this order
                found[path] = ForeignLib(path=path, origin=origin, on_load_path=on_path)
    return tuple(found.values())


def _inside(path: Path, prefix: Path) -> bool:
    real = Path(os.path.realpath(prefix))
    return path.is_relative_to(prefix) or path.is_relative_to(real)


def loaded_libs(paths: Iterable[str], prefix: Path) -> list[LoadedLib]:
    """The watched CUDA libraries among mapped file paths, in order, one per file."""
    loaded: dict[Path, LoadedLib] = {}
    for text in paths:
        path = Path(text.removesuffix(" (deleted)"))
        if path not in loaded and lib_family(path.name):
            loaded[path] = LoadedLib(name=path.name, path=path, inside_prefix=_inside(path, prefix))
    return list(loaded.values())
