"""Driver detection: the real answer on this host, overrides, and sources fed recorded output."""

from __future__ import annotations

import ctypes.util
import os
import shutil
import stat
from pathlib import Path

import pytest

from verl_bootstrap.errors import InputError
from verl_bootstrap.machine.gpu.detect import detect_driver
from verl_bootstrap.machine.gpu.nvml import read_nvml

DATA = Path(__file__).parent / "data" / "nvidia"
HOST_HAS_DRIVER = (
    Path("/proc/driver/nvidia/version").exists()
    or ctypes.util.find_library("nvidia-ml") is not None
    or shutil.which("nvidia-smi") is not None
)
CLEAN = {"PATH": os.environ.get("PATH", "")}


@pytest.mark.skipif(HOST_HAS_DRIVER, reason="this host has an NVIDIA driver")
def test_host_without_driver_says_none_even_with_a_cuda_toolkit() -> None:
    # These hosts carry nvcc 13 and /usr/local/cuda; neither may pass for a driver.
    assert detect_driver(environ=CLEAN) is None
    assert read_nvml() is None


@pytest.mark.gpu
@pytest.mark.skipif(not HOST_HAS_DRIVER, reason="needs an NVIDIA GPU and driver")
def test_host_with_driver_reads_it_from_the_driver() -> None:
    info = detect_driver(environ=CLEAN)
    assert info is not None and info.source in {"nvml", "/proc/driver/nvidia/version"}
    assert info.gpus and all(g.compute_capability for g in info.gpus)


def test_a_library_that_is_not_nvml_reads_as_no_driver(tmp_path: Path) -> None:
    fake = tmp_path / "libnvidia-ml.so.1"
    shutil.copy(Path("/lib/x86_64-linux-gnu/libz.so.1").resolve(), fake)
    assert read_nvml(str(fake)) is None


def test_driver_override_wins_and_names_itself() -> None:
    info = detect_driver(environ={"VERL_BOOTSTRAP_CUDA_DRIVER": "580.65.06"}, use_nvml=False)
    assert info is not None
    assert (info.version, info.cuda, info.source) == (
        "580.65.06",
        "13.0",
        "VERL_BOOTSTRAP_CUDA_DRIVER",
    )
    short = detect_driver(environ={"VERL_BOOTSTRAP_CUDA_DRIVER": "570"}, use_nvml=False)
    assert short is not None and short.cuda == "12.8" and short.major == 570


def test_bad_driver_override_is_an_input_error() -> None:
    with pytest.raises(InputError, match="not a driver version"):
        detect_driver(environ={"VERL_BOOTSTRAP_CUDA_DRIVER": "latest"})


def test_conda_override_stands_in_only_without_a_driver(tmp_path: Path) -> None:
    env = {"CONDA_OVERRIDE_CUDA": "12.8"}
    info = detect_driver(root=tmp_path, environ=env, use_nvml=False, nvidia_smi=None)
    assert info is not None
    assert (info.cuda, info.version, info.source) == ("12.8", "570", "CONDA_OVERRIDE_CUDA")
    empty = {"CONDA_OVERRIDE_CUDA": ""}  # conda: empty means "no CUDA"
    assert detect_driver(root=tmp_path, environ=empty, use_nvml=False, nvidia_smi=None) is None
    with pytest.raises(InputError):
        detect_driver(root=tmp_path, environ={"CONDA_OVERRIDE_CUDA": "x"}, use_nvml=False)


def _proc_root(tmp_path: Path, version: str) -> Path:
    # No recorded /proc/driver/nvidia/version exists: this file follows the driver's documented
    # format, with a driver version taken from the recorded 595.80 L40S capture.
    folder = tmp_path / "proc" / "driver" / "nvidia"
    folder.mkdir(parents=True)
    (folder / "version").write_text(
        f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  "
        "(builder@host)  Fri Jul  3 08:33:38 UTC 2026\nGCC version:  gcc version 12.2.0\n"
    )
    return tmp_path


def test_proc_version_is_read_through_the_injected_root(tmp_path: Path) -> None:
    root = _proc_root(tmp_path, "595.80")
    info = detect_driver(root=root, environ={"CONDA_OVERRIDE_CUDA": "12.0"}, use_nvml=False)
    assert info is not None
    assert (info.version, info.cuda, info.source) == (
        "595.80",
        "13.2",
        "/proc/driver/nvidia/version",
    )


def _fake_smi(tmp_path: Path, xml: str, csv: str) -> str:
    """An nvidia-smi stand-in that prints recorded outputs (`-q -x` and `--query-gpu`)."""
    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        f'case "$1" in -q) cat "{DATA / xml}" ;; --query-gpu=*) cat "{DATA / csv}" ;; '
        "*) exit 9 ;; esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_nvidia_smi_xml_plus_query_gives_gpus_with_compute_capability(tmp_path: Path) -> None:
    smi = _fake_smi(tmp_path, "590.44.01-RTXA5000x2-qx.xml", "595.80-L40S-csv.txt")
    info = detect_driver(root=tmp_path, environ=CLEAN, use_nvml=False, nvidia_smi=smi)
    assert info is not None and info.source == "nvidia-smi"
    assert (info.version, info.cuda, len(info.gpus)) == ("590.44.01", "13.1", 2)
    # The recorded CSV belongs to another host: its UUID matches neither GPU, so none is guessed.
    assert [g.compute_capability for g in info.gpus] == [None, None]


def test_proc_version_keeps_its_source_and_takes_gpus_from_nvidia_smi(tmp_path: Path) -> None:
    root = _proc_root(tmp_path, "590.48.01")
    smi = _fake_smi(tmp_path, "590.44.01-RTXPRO6000-Blackwell-qx.xml", "595.80-L40S-csv.txt")
    info = detect_driver(root=root, environ=CLEAN, use_nvml=False, nvidia_smi=smi)
    assert info is not None and info.source == "/proc/driver/nvidia/version"
    assert info.version == "590.48.01"
    assert [g.name for g in info.gpus] == [
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
    ]


def test_missing_or_failing_nvidia_smi_means_no_driver(tmp_path: Path) -> None:
    assert detect_driver(root=tmp_path, environ=CLEAN, use_nvml=False, nvidia_smi="no-such") is None
    failing = tmp_path / "nvidia-smi"
    failing.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    failing.chmod(0o755)
    info = detect_driver(root=tmp_path, environ=CLEAN, use_nvml=False, nvidia_smi=str(failing))
    assert info is None
