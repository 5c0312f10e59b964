"""The driver-output parsers (the tool's, and the tests' readers in nvidiatext.py for outputs the
tool never reads) against every recorded real output in tests/data/nvidia/."""

from __future__ import annotations

from pathlib import Path

import pytest
from nvidiatext import parse_query_csv, parse_smi_list, parse_smi_table

from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.gpu.query import parse_query_gpus
from verl_bootstrap.machine.gpu.smiparse import parse_proc_version, parse_smi_xml

DATA = Path(__file__).parent / "data" / "nvidia"

# file -> (driver, CUDA shown, GPU names, memory MiB of GPU 0, MIG enabled, MIG device count),
# each value read off the recorded file itself (see INDEX.md there).
EXPECTED: dict[str, tuple[str, str | None, list[str], int, bool, int]] = {
    "470.74-GT1030-qx.xml": ("470.74", "11.4", ["NVIDIA GeForce GT 1030"], 1998, False, 0),
    "515.105.01-T4-qx.xml": ("515.105.01", "11.7", ["Tesla T4"], 15360, False, 0),
    "515.105.01-A10G-qx.xml": ("515.105.01", "11.7", ["NVIDIA A10G"], 23028, False, 0),
    "525.147.05-RTX3090-qx.xml": (
        "525.147.05",
        "12.0",
        ["NVIDIA GeForce RTX 3090"],
        24576,
        False,
        0,
    ),
    "535.54.03-A100-SXM4-80GBx4-MIG-qx.xml": (
        "535.54.03",
        "12.2",
        ["NVIDIA A100-SXM4-80GB"],
        81920,
        True,
        4,
    ),
    "536.40-RTX3080-win-qx.xml": ("536.40", "12.2", ["NVIDIA GeForce RTX 3080"], 10240, False, 0),
    "570.124.04-RTX3060-qx.xml": (
        "570.124.04",
        "12.8",
        ["NVIDIA GeForce RTX 3060"],
        12288,
        False,
        0,
    ),
    "590.44.01-RTXA5000x2-qx.xml": (
        "590.44.01",
        "13.1",
        ["NVIDIA RTX A5000", "NVIDIA RTX A5000"],
        24564,
        False,
        0,
    ),
    "590.44.01-RTXPRO6000-Blackwell-qx.xml": (
        "590.44.01",
        "13.1",
        ["NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"],
        97887,
        False,
        0,
    ),
    "595.58.03-RTX3080-qx.xml": ("595.58.03", "13.2", ["NVIDIA GeForce RTX 3080"], 10240, False, 0),
    "535.104.12-H100-MIG-table.txt": (
        "535.104.12",
        "12.2",
        ["NVIDIA H100 80GB HBM3"],
        81559,
        True,
        4,
    ),
    "590.48.01-H100-table.txt": ("590.48.01", "13.1", ["NVIDIA H100 80GB HBM3"], 81559, False, 0),
    "590.48.01-H100-MIG-table.txt": (
        "590.48.01",
        "13.1",
        ["NVIDIA H100 80GB HBM3"],
        81559,
        True,
        4,
    ),
    "590.48.01-H200-table.txt": ("590.48.01", "13.1", ["NVIDIA H200"], 143771, False, 0),
    "591.86-RTX2080S-win-table.txt": (
        "591.86",
        "13.1",
        ["NVIDIA GeForce RTX 2080 ..."],
        8192,
        False,
        0,
    ),
    "595.71.05-RTX4080S-table.txt": (
        "595.71.05",
        "13.2",
        ["NVIDIA GeForce RTX 4080 ..."],
        16376,
        False,
        0,
    ),
    "595.80-L40S-table.txt": ("595.80", "13.2", ["NVIDIA L40S"], 46068, False, 0),
    "610.57.04-RTX2080S-table.txt": (
        "610.57.04",
        "13.3",
        ["NVIDIA GeForce RTX 2080 ..."],
        8192,
        False,
        0,
    ),
    "590.48.01-H100-MIG-csv.txt": ("590.48.01", None, ["NVIDIA H100 80GB HBM3"], 81559, True, 0),
    "595.80-L40S-csv.txt": ("595.80", None, ["NVIDIA L40S"], 46068, False, 0),
    "610.57.04-RTX2080S-csv.txt": (
        "610.57.04",
        None,
        ["NVIDIA GeForce RTX 2080 SUPER"],
        8192,
        False,
        0,
    ),
}
CSV_CC = {
    "590.48.01-H100-MIG-csv.txt": "9.0",
    "595.80-L40S-csv.txt": "8.9",
    "610.57.04-RTX2080S-csv.txt": "7.5",
}


def _read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def _parse(name: str) -> DriverInfo | None:
    if name.endswith(".xml"):
        return parse_smi_xml(_read(name))
    if name.endswith("-table.txt"):
        return parse_smi_table(_read(name))
    return parse_query_csv(_read(name))


def test_every_recorded_file_has_a_test() -> None:
    recorded = {p.name for p in DATA.iterdir() if p.suffix in {".xml", ".txt"}}
    tested = set(EXPECTED) | {"590.48.01-H100-MIG-list.txt"}
    assert recorded == tested


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_output_gives_driver_cuda_and_gpus(name: str) -> None:
    version, cuda, names, memory, mig, mig_count = EXPECTED[name]
    info = _parse(name)
    assert info is not None
    assert (info.version, info.cuda, info.source) == (version, cuda, "nvidia-smi")
    assert [g.name for g in info.gpus] == names
    assert [g.index for g in info.gpus] == list(range(len(names)))
    assert info.gpus[0].memory_mib == memory
    assert info.gpus[0].mig is mig
    assert len(info.gpus[0].mig_devices) == mig_count


@pytest.mark.parametrize("name", sorted(CSV_CC))
def test_query_csv_reads_compute_capability_despite_units_in_values(name: str) -> None:
    gpus = parse_query_gpus(_read(name))
    assert [g.compute_capability for g in gpus] == [CSV_CC[name]]
    assert gpus[0].uuid == "GPU-00000000-0000-0000-0000-000000000000"


def test_r610_csv_prefers_kmd_version() -> None:
    info = parse_query_csv(_read("610.57.04-RTX2080S-csv.txt"))
    assert info is not None and info.version == "610.57.04" and info.attached == 1


def test_edited_a100_xml_keeps_attached_count_beside_the_one_gpu() -> None:
    info = parse_smi_xml(_read("535.54.03-A100-SXM4-80GBx4-MIG-qx.xml"))
    assert info is not None
    assert info.attached == 4 and len(info.gpus) == 1
    gpu = info.gpus[0]
    assert gpu.uuid == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert [(m.gpu_instance, m.compute_instance) for m in gpu.mig_devices] == [
        (3, 0),
        (4, 0),
        (5, 0),
        (6, 0),
    ]
    assert {m.memory_mib for m in gpu.mig_devices} == {19968}


def test_multi_gpu_xml_numbers_gpus_in_document_order_with_bus_ids() -> None:
    info = parse_smi_xml(_read("590.44.01-RTXA5000x2-qx.xml"))
    assert info is not None
    assert [(g.index, g.bus_id) for g in info.gpus] == [
        (0, "00000000:81:00.0"),
        (1, "00000000:C1:00.0"),
    ]
    assert info.gpus[1].uuid == "GPU-12345678-aaaa-bbbb-cccc-0123456789cd"


def test_mig_tables_of_535_and_590_layouts_give_the_same_instances() -> None:
    old = parse_smi_table(_read("535.104.12-H100-MIG-table.txt"))
    new = parse_smi_table(_read("590.48.01-H100-MIG-table.txt"))
    assert old is not None and new is not None
    ids = [(m.index, m.gpu_instance, m.compute_instance) for m in old.gpus[0].mig_devices]
    assert ids == [(0, 2, 0), (1, 3, 0), (2, 9, 0), (3, 10, 0)]
    assert [m.memory_mib for m in new.gpus[0].mig_devices] == [40448, 20096, 9984, 9984]


def test_smi_list_puts_mig_devices_under_their_gpu() -> None:
    gpus = parse_smi_list(_read("590.48.01-H100-MIG-list.txt"))
    assert len(gpus) == 1 and gpus[0].mig
    assert [m.profile for m in gpus[0].mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert gpus[0].mig_devices[1].uuid == "MIG-00000001-0000-0000-0000-000000000001"


def test_parsers_answer_none_for_text_that_is_not_theirs() -> None:
    table = _read("590.48.01-H100-table.txt")
    assert parse_smi_xml(table) is None
    assert parse_smi_xml("<nvidia_smi_log><broken") is None
    assert parse_query_csv(table) is None
    assert parse_smi_table(_read("470.74-GT1030-qx.xml")) is None
    assert parse_smi_list(table) == ()


def test_proc_version_parser_reads_both_kernel_module_flavours() -> None:
    # No recorded /proc/driver/nvidia/version exists in the fixture set: these lines follow the
    # driver's documented format, with driver versions taken from recorded outputs here.
    proprietary = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48.01  Tue Jul 14 08:12:38 UTC 2026\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    open_module = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  595.80  Release Build  "
        "(builder@host)  Fri Jul  3 08:33:38 UTC 2026\n"
    )
    assert parse_proc_version(proprietary) == "590.48.01"
    assert parse_proc_version(open_module) == "595.80"
    assert parse_proc_version("GCC version:  gcc version 12.2.0\n") is None
