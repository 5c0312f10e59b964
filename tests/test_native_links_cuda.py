"""A CUDA library a library needs by a name its env (or lock) does not have: real ELF libraries
built with gcc, named as NVIDIA's wheels name them (a core linked against `libcublasLt.so.12`
where the set has only `libcublasLt.so.13`, as a CUDA 12 TransformerEngine core beside CUDA 13's
cuBLAS), judged by the one function that both `verify` and `lock --check --links` use, and the
real dynamic loader asked the same."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from elflibs import Cuda, build_cuda, env_with, lock_of, wheel_of

from verl_bootstrap.lock.making.nativelinks import LinkCheck, native_link_gaps
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.verify.cudalibs import cuda_family
from verl_bootstrap.verify.elf import read_links
from verl_bootstrap.verify.env import verify_env
from verl_bootstrap.verify.links import Library, link_gaps

CORE = "te/lib/libcore.so"


def _lacks_lt12(among: str, where: str = CORE, owner: str = "core 1.0") -> str:
    return (
        f"{where} ({owner}) needs libcublasLt.so.12, which nothing in {among} provides (it has "
        "libcublasLt.so.13): loading it fails with `libcublasLt.so.12: cannot open shared "
        "object file`"
    )


@pytest.fixture(scope="module")
def cuda(tmp_path_factory: pytest.TempPathFactory) -> Cuda:
    return build_cuda(tmp_path_factory.mktemp("cuda"))


def _lib(path: Path, where: str = "", owner: str = "") -> Library:
    with path.open("rb") as stream:
        links = read_links(stream)
    return Library(where or f"{path.parent.name}/{path.name}", owner or "dist 1.0", links)


def _loads(library: Path, *folders: Path) -> subprocess.CompletedProcess[str]:
    """The real dynamic loader's answer: `library` opened with `folders` on its search path."""
    code = f"import ctypes; ctypes.CDLL({str(library)!r})"
    env = {"LD_LIBRARY_PATH": ":".join(str(f) for f in folders)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )


def test_a_cuda_library_needed_by_a_name_the_set_lacks_is_a_gap(cuda: Cuda) -> None:
    core = _lib(cuda.core, CORE, "core 1.0")
    [gap] = link_gaps([core, _lib(cuda.lt13)], among="the lock")
    assert gap.line() == _lacks_lt12("the lock")
    assert link_gaps([core, _lib(cuda.lt12)], among="the lock") == []
    # the loader says the same: the driver from the host, cuBLASLt from the set
    failed = _loads(cuda.core, cuda.lt13.parent, cuda.driver.parent)
    assert "libcublasLt.so.12: cannot open shared object file" in failed.stderr, failed
    loaded = _loads(cuda.core, cuda.lt12.parent, cuda.driver.parent)
    assert loaded.returncode == 0, loaded.stderr


def test_the_drivers_library_and_any_other_the_set_lacks_stay_the_hosts(cuda: Cuda) -> None:
    """libcuda.so.1 is the host's (the core needs it; the set never has it); a library needing
    cuBLASLt from an empty set names the wheels that ship it."""
    core = _lib(cuda.core, CORE, "core 1.0")
    assert link_gaps([core, _lib(cuda.lt12)]) == []
    [alone] = link_gaps([core], among="the env")
    assert alone.line() == (
        f"{CORE} (core 1.0) needs libcublasLt.so.12, which nothing in the env provides (it has "
        "no libcublasLt: the nvidia-cublas wheels ship it): loading it fails with "
        "`libcublasLt.so.12: cannot open shared object file`"
    )
    assert [cuda_family(n) for n in ("libcuda.so.1", "libnvidia-ml.so.1", "libz.so.1")] == [
        None
    ] * 3


def test_each_library_a_core_lacks_is_said_on_its_one_line(cuda: Cuda) -> None:
    user = _lib(cuda.cudnn_user, "attn/libattention.so", "attn 1.0")
    [gap] = link_gaps([user, _lib(cuda.lt13)], among="the lock")
    assert gap.line() == (
        "attn/libattention.so (attn 1.0) needs libcudnn.so.9, libcudnn_ops.so.9 and "
        "libcublasLt.so.12, which nothing in the lock provides (it has libcublasLt.so.13; no "
        "libcudnn and libcudnn_ops: the nvidia-cudnn wheels ship them): loading it fails with "
        "`libcudnn.so.9: cannot open shared object file`"
    )


def test_a_wheels_build_for_another_cuda_major_is_not_its_gap(cuda: Cuda) -> None:
    """A wheel that ships one build per CUDA major loads the one that matches, by path: its
    CUDA 12 build beside CUDA 13's cuBLASLt is never loaded. Another distribution's is."""
    hooks = [_lib(path, f"saver/{path.name}", "saver 1.0") for path in cuda.hooks]
    lt13 = _lib(cuda.lt13)
    assert link_gaps([*hooks, lt13]) == []
    core = _lib(cuda.core, CORE, "core 1.0")
    assert [g.line() for g in link_gaps([*hooks, core, lt13], among="the lock")] == [
        _lacks_lt12("the lock")
    ]
    [alone] = link_gaps([hooks[0], lt13], among="the lock")  # no CUDA 13 build beside it
    assert alone.line() == _lacks_lt12("the lock", "saver/libhook_cu12.so", "saver 1.0")


def test_a_copy_a_wheels_repair_renamed_is_found_by_its_file_name(cuda: Cuda) -> None:
    """torchvision's image module needs `libcudart.faf08d9a.so.13`, the copy it ships (whose
    SONAME is `libcudart.so.13`): the set has it."""
    user = _lib(cuda.copy_user)
    assert user.links.needed[0] == "libcudart.faf08d9a.so.13"
    copy = _lib(cuda.cudart_copy, "vision.libs/libcudart.faf08d9a.so.13")
    assert copy.name == "libcudart.so.13"
    assert link_gaps([user, copy]) == []
    assert _loads(cuda.copy_user, cuda.cudart_copy.parent).returncode == 0
    [gap] = link_gaps([user])
    assert "needs libcudart.faf08d9a.so.13, which nothing in the set provides" in gap.line()


def test_verify_fails_an_env_whose_core_needs_a_cuda_library_it_lacks(
    cuda: Cuda, tmp_path: Path
) -> None:
    def check(lt: Path) -> tuple[str, str]:
        dists = {"core": {CORE: cuda.core}, "cublas": {f"nvidia/cu13/lib/{lt.name}": lt}}
        report = verify_env(
            env_with(tmp_path / lt.name, dists), VerifySpec(imports=(), gpu_smoke=False)
        )
        [found] = [c for c in report.checks if c.name == "native links"]
        return found.status, found.detail

    assert check(cuda.lt13) == ("fail", _lacks_lt12("the env"))
    assert check(cuda.lt12)[0] == "ok"


def test_lock_check_links_names_the_cuda_library_the_lock_lacks(cuda: Cuda, tmp_path: Path) -> None:
    """The lock's wheels, read as `lock --check --links` reads them."""
    links = tmp_path / "links"
    links.mkdir()
    core = wheel_of(links, "core", {CORE: cuda.core})
    cublas = wheel_of(links, "cublas", {"nvidia/cu13/lib/libcublasLt.so.13": cuda.lt13})
    lock = lock_of(tmp_path, [core, cublas])
    settings = IndexSettings(index_url=(tmp_path / "no-index").as_uri(), find_links=(str(links),))
    (tmp_path / "cache").mkdir()
    check = LinkCheck(settings, tmp_path / "work", tmp_path / "cache")
    assert native_link_gaps(lock, check) == [_lacks_lt12("the lock")]


def test_a_cuda_build_in_an_env_with_no_cuda_library_is_a_named_warning(
    cuda: Cuda, tmp_path: Path
) -> None:
    """A CPU env (no CUDA library at all) holding a package's CUDA build (torchcodec's wheel on
    the default index, beside CPU torch): that package cannot load, the rest of the env works,
    and verify says which package and where its CPU build comes from. The same need beside a
    CUDA library of the env (a GPU env missing one of its libraries) stays a failure."""

    def check(dists: dict[str, dict[str, Path]], name: str) -> tuple[str, str]:
        report = verify_env(
            env_with(tmp_path / name, dists), VerifySpec(imports=(), gpu_smoke=False)
        )
        [found] = [c for c in report.checks if c.name == "native links"]
        return found.status, found.detail

    status, detail = check({"core": {CORE: cuda.core}}, "cpu")
    assert status == "warn"
    assert detail.startswith("core 1.0: a CUDA build in a CPU env (its libraries need ")
    assert "libcublasLt.so.12" in detail and "pytorch-cpu" in detail
    gpu = {
        "core": {CORE: cuda.core},
        "cudart": {"nvidia/cu13/lib/libcudart.so.13": cuda.cudart_copy},
    }
    assert check(gpu, "gpu")[0] == "fail"
    # a CUDA build that bundles one CUDA library of its own (torchcodec's libnvjpeg) and still
    # lacks the rest: the env stays a CPU env, and the package a named warning
    bundled = {"core": {CORE: cuda.core, "core.libs/libcudart-1a2b3c4d.so.13": cuda.cudart_copy}}
    assert check(bundled, "bundled")[0] == "warn"
