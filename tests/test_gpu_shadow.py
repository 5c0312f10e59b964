"""Foreign CUDA libraries: real ELF files on the load path, and the libraries a real process has
mapped, read by doctor's own probe (probes/libs.py) as the shadowing-loaded check reads them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verl_bootstrap.machine.gpu.shadow import LoadedLib, find_foreign_libs, lib_family, loaded_libs
from verl_bootstrap.paths import PROBES

REAL_SO = Path("/lib/x86_64-linux-gnu/libz.so.1").resolve()
# loads a library, then asks the probe's own reader what the process has mapped
DLOPEN_AND_PROBE = (
    "import ctypes, json, os, runpy, sys; ctypes.CDLL(sys.argv[1]); "
    "os.remove(sys.argv[1]) if sys.argv[3:] == ['delete'] else None; "
    "probe = runpy.run_path(sys.argv[2]); print(json.dumps(probe['loaded_libraries']()))"
)


def probed(
    library: Path, prefix: Path, *, delete: bool = False
) -> tuple[list[str], list[LoadedLib]]:
    """The paths the probe reports for a process that loaded `library`, and doctor's reading."""
    argv = [sys.executable, "-c", DLOPEN_AND_PROBE, str(library), str(PROBES / "libs.py")]
    argv += ["delete"] if delete else []
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    paths, error = json.loads(done.stdout)
    assert error is None
    return paths, loaded_libs(paths, prefix)


@pytest.fixture
def foreign_cudnn(tmp_path: Path) -> Path:
    """A real shared library (zlib's) under cuDNN's name, in its own folder."""
    folder = tmp_path / "opt" / "cudnn" / "lib"
    folder.mkdir(parents=True)
    shutil.copy(REAL_SO, folder / "libcudnn.so.9")
    return folder / "libcudnn.so.9"


def test_lib_family_knows_the_watched_names() -> None:
    assert lib_family("libcudnn_ops.so.9") == "libcudnn"
    assert lib_family("libcublasLt.so.13") == "libcublas"
    assert lib_family("libnccl.so.2") == "libnccl"
    assert lib_family("libcudart.so.13") == "libcudart"
    assert lib_family("libz.so.1") is None
    assert lib_family("libcudart_static.a") is None


def test_a_real_process_that_loads_a_foreign_cudnn_is_flagged(
    foreign_cudnn: Path, tmp_path: Path
) -> None:
    env_prefix = tmp_path / "env"
    _, loaded = probed(foreign_cudnn, env_prefix)
    assert [(x.name, x.path, x.inside_prefix) for x in loaded] == [
        ("libcudnn.so.9", foreign_cudnn, False)
    ]
    assert probed(foreign_cudnn, tmp_path)[1][0].inside_prefix  # the same file, inside tmp_path


def test_ld_library_path_entries_holding_cuda_libs_are_found(
    foreign_cudnn: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"LD_LIBRARY_PATH": f"{empty}:{foreign_cudnn.parent}:{tmp_path / 'missing'}"}
    found = find_foreign_libs(root=tmp_path, environ=env)
    assert [(x.path, x.origin, x.on_load_path) for x in found] == [
        (foreign_cudnn, "LD_LIBRARY_PATH", True)
    ]


def test_ld_so_conf_d_folders_are_read_through_the_root(
    foreign_cudnn: Path, tmp_path: Path
) -> None:
    conf = tmp_path / "etc" / "ld.so.conf.d"
    conf.mkdir(parents=True)
    (conf / "cudnn.conf").write_text("# cuDNN\n/opt/cudnn/lib\ninclude /etc/other/*.conf\n")
    (conf / "notes.txt").write_text("/opt/cudnn/lib\n")  # not a .conf: the loader ignores it
    found = find_foreign_libs(root=tmp_path, environ={})
    assert [(x.path, x.origin) for x in found] == [(foreign_cudnn, "/etc/ld.so.conf.d/cudnn.conf")]


def test_toolkit_homes_are_reported_but_not_on_the_load_path(tmp_path: Path) -> None:
    lib64 = tmp_path / "cuda" / "lib64"
    lib64.mkdir(parents=True)
    shutil.copy(REAL_SO, lib64 / "libcudart.so.13")
    cudnn = tmp_path / "cudnn" / "lib"
    cudnn.mkdir(parents=True)
    shutil.copy(REAL_SO, cudnn / "libcudnn_cnn.so.9")
    env = {"CUDA_HOME": str(tmp_path / "cuda"), "CUDNN_HOME": str(tmp_path / "cudnn")}
    found = find_foreign_libs(root=tmp_path, environ=env)
    assert [(x.path.name, x.origin, x.on_load_path) for x in found] == [
        ("libcudart.so.13", "CUDA_HOME", False),
        ("libcudnn_cnn.so.9", "CUDNN_HOME", False),
    ]


def test_a_library_deleted_after_loading_still_counts(tmp_path: Path) -> None:
    env_lib = tmp_path / "env" / "lib"
    env_lib.mkdir(parents=True)
    nccl = env_lib / "libnccl.so.2"
    shutil.copy(REAL_SO, nccl)
    paths, loaded = probed(nccl, tmp_path / "env", delete=True)
    assert paths == [f"{nccl} (deleted)"]  # the probe keeps the loader's mark
    assert [(x.path, x.inside_prefix) for x in loaded] == [(nccl, True)]
