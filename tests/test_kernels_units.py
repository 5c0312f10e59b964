"""The kernel parts that need no env: build keys, the wheelhouse folder, sizing, source choice."""

from __future__ import annotations

import _json
import json
import multiprocessing
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from verl_bootstrap.errors import InputError, Refused
from verl_bootstrap.kernels.kernelchoice import KernelQuery, LockPins, choose
from verl_bootstrap.kernels.key import BuildKey, render_template
from verl_bootstrap.kernels.sizing import (
    HostResources,
    arch_variables,
    choose_archs,
    choose_max_jobs,
    device_passes,
    oom_message,
    read_resources,
)
from verl_bootstrap.kernels.sources import KernelChoice, pinned_version
from verl_bootstrap.kernels.wheelhouse import Entry, Wheelhouse
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.gpu.query import parse_query_gpus
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.profile.kernel import KernelSpec

NVIDIA = Path(__file__).parent / "data" / "nvidia"
FLASH = (
    "https://releases.example/v{version}/flash_attn-{version}+cu{cuda_major}torch{torch_minor}"
    "cxx11abi{cxx11abi}-{python}-{python}-{platform}.whl"
)
ENV = BuildKey(torch="2.8.0", cuda="12.8", cxx11abi=False, python="cp312", platform="linux_x86_64")


def wheel(folder: Path, name: str = "standin_kernel-0.1.0-cp312-cp312-linux_x86_64.whl") -> Path:
    """A real (tiny) wheel file, holding a compiled module as a kernel's does (the bytes of a real
    ELF extension module of this host's Python, named for ENV's cp312)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("standin_kernel/__init__.py", f"# {name}\n")
        module = "standin_kernel/_C.cpython-312-x86_64-linux-gnu.so"
        zf.writestr(module, Path(_json.__file__).read_bytes())
    return path


def driver(*fixtures: str) -> DriverInfo:
    gpus = tuple(
        g for f in fixtures for g in parse_query_gpus((NVIDIA / f).read_text(encoding="utf-8"))
    )
    return DriverInfo(version="590.48.01", cuda="13.1", source="test", gpus=gpus)


def test_a_release_names_coarse_key_covers_the_envs_finer_one() -> None:
    # what flash-attn 2.8.1's release name cu12torch2.8cxx11abiFALSE-cp312 states
    key = BuildKey(torch="2.8", cuda="12", cxx11abi=False, python="cp312", platform="linux_x86_64")
    assert key.mismatches(ENV) == []  # torch 2.8 covers 2.8.0, CUDA 12 covers 12.8
    assert key.mismatches(BuildKey(**{**ENV.to_json(), "cxx11abi": True})) == [
        "cxx11abi FALSE (env: TRUE)"
    ]


def test_the_release_url_is_rendered_for_the_envs_key_and_not_for_a_partial_one() -> None:
    url = render_template(FLASH, "2.8.1", ENV)
    assert url is not None and url.endswith(
        "/v2.8.1/flash_attn-2.8.1+cu12torch2.8cxx11abiFALSE-cp312-cp312-linux_x86_64.whl"
    )
    assert render_template(FLASH, "2.8.1", BuildKey(torch="2.8.0")) is None


def test_a_bad_pattern_is_refused_at_the_profile() -> None:
    with pytest.raises(ValueError, match=r"unknown placeholder \{torchh\}"):
        KernelSpec(distribution="flash-attn", release_wheels=("x-{torchh}.whl",))


def test_an_unstated_field_never_matches() -> None:
    assert BuildKey(torch="2.8.0").mismatches(ENV) == [
        "cuda not stated",
        "cxx11abi not stated",
        "python not stated",
        "platform not stated",
    ]


def test_publish_lookup_and_check(tmp_path: Path) -> None:
    house = Wheelhouse(tmp_path / "house")
    built = wheel(tmp_path / "build")
    entry = house.publish(built, ENV)
    assert (house.root / built.name).read_bytes() == built.read_bytes()
    assert entry.sha256 == file_sha256(built)
    assert house.lookup("standin-kernel", "0.1.0", ENV) == entry
    assert (
        house.lookup("standin_kernel", "0.1.0", BuildKey(**{**ENV.to_json(), "torch": "2.9.0"}))
        is None
    )
    assert house.lookup("standin-kernel", "0.2.0", ENV) is None
    assert house.check().all == []
    (house.root / built.name).write_bytes(b"changed")
    assert house.check().all == [f"{built.name}: sha256 differs from the index (the file changed)"]


def _publish_one(root: str, folder: str, number: int) -> None:
    name = f"standin_kernel-0.{number}.0-cp312-cp312-linux_x86_64.whl"
    Wheelhouse(Path(root)).publish(wheel(Path(folder), name), ENV)


def test_two_processes_publishing_at_once_both_land(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    workers = [
        ctx.Process(target=_publish_one, args=(str(tmp_path / "house"), str(tmp_path / f"b{n}"), n))
        for n in range(1, 7)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
        assert w.exitcode == 0
    house = Wheelhouse(tmp_path / "house")
    assert sorted(e.version for e in house.entries()) == [f"0.{n}.0" for n in range(1, 7)]
    assert house.check().all == []
    assert not [p for p in house.root.iterdir() if p.name.startswith(".") and p.name != ".lock"]


def _make_read_only(folder: Path) -> Callable[[], None]:
    """Read-only for this user: a mode for others, a read-only bind mount for root (whom modes
    do not stop); returns the undo."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda: folder.chmod(0o755)
    done = subprocess.run(
        ["mount", "--bind", "-o", "ro", str(folder), str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"root cannot bind-mount here ({done.stderr.strip()}); CI can")

    def unmount() -> None:
        subprocess.run(["umount", str(folder)], check=False)

    return unmount


def test_a_read_only_wheelhouse_is_read_never_written(tmp_path: Path) -> None:
    house = Wheelhouse(tmp_path / "house")
    house.publish(wheel(tmp_path / "b"), ENV)
    undo = _make_read_only(house.root)
    try:
        assert not house.writable()
        assert house.lookup("standin-kernel", "0.1.0", ENV) is not None
        with pytest.raises(Refused, match="read-only for you"):
            house.publish(wheel(tmp_path / "c", "other-1.0-py3-none-any.whl"), ENV)
    finally:
        undo()


def test_an_index_entry_that_leaves_the_folder_is_never_used(tmp_path: Path) -> None:
    """Skipped with a note, not a refusal of the whole (shared) index; `check` names it."""
    from verl_bootstrap.events import listening  # noqa: PLC0415

    house = Wheelhouse(tmp_path)
    row = {"file": "../evil-1.0-py3-none-any.whl", "sha256": "0" * 64, "key": {}}
    house.index_path.write_text(json.dumps({"wheels": [row]}))
    notes: list[str] = []
    with listening(lambda event: notes.append(event.message)):
        assert house.entries() == ()
    assert len(notes) == 1 and "wheels[0]: '../evil" in notes[0]
    assert ["../evil" in p for p in house.check().all] == [True]
    house.index_path.write_text("not json")
    with pytest.raises(InputError, match="not a wheelhouse index"):
        house.entries()


@pytest.mark.parametrize(
    ("fixtures", "archs", "variables"),
    [
        (("590.48.01-H100-MIG-csv.txt",), ("9.0",), {"FLASH_ATTN_CUDA_ARCHS": "90"}),
        (
            ("595.80-L40S-csv.txt", "590.48.01-H100-MIG-csv.txt", "610.57.04-RTX2080S-csv.txt"),
            ("7.5", "8.9", "9.0"),
            {"FLASH_ATTN_CUDA_ARCHS": "75;89;90"},
        ),
    ],
)
def test_the_arch_list_follows_the_recorded_gpus(
    fixtures: tuple[str, ...], archs: tuple[str, ...], variables: dict[str, str]
) -> None:
    chosen, why = choose_archs(driver(*fixtures), (), ("8.0",))
    assert chosen == archs and "this host's GPUs" in why
    assert arch_variables(("FLASH_ATTN_CUDA_ARCHS",), chosen) == variables
    assert arch_variables(("TORCH_CUDA_ARCH_LIST", "NVTE_CUDA_ARCHS"), chosen) == {
        "TORCH_CUDA_ARCH_LIST": ";".join(archs),
        "NVTE_CUDA_ARCHS": variables["FLASH_ATTN_CUDA_ARCHS"],
    }


def test_the_flag_beats_the_gpus_and_the_site_default_serves_a_login_node() -> None:
    assert choose_archs(driver("595.80-L40S-csv.txt"), ("9.0",), ())[0] == ("9.0",)
    assert choose_archs(None, (), ("9.0", "10.0")) == (
        ("9.0", "10.0"),
        "the site config's default (no GPU seen here)",
    )
    assert choose_archs(None, (), ())[0] == ()


@pytest.mark.parametrize(
    ("cores", "ram", "per_job", "jobs"),
    [(16, 64.0, 4.0, 16), (16, 24.0, 4.0, 6), (64, 500.0, 8.0, 62), (2, 1.0, 4.0, 1)],
)
def test_max_jobs_follows_ram_and_cores(cores: int, ram: float, per_job: float, jobs: int) -> None:
    assert choose_max_jobs(HostResources(cores, ram), per_job)[0] == jobs


@pytest.mark.parametrize(
    ("threads", "archs", "passes"),
    [(None, 1, 1), ("4", 1, 1), ("4", 0, 4), ("4", 2, 2), ("8", 0, 4), ("x", 3, 1), ("0", 3, 1)],
)
def test_device_passes_per_job(threads: str | None, archs: int, passes: int) -> None:
    """nvcc --threads N runs at most one pass per architecture; no list is about four."""
    assert device_passes(threads, archs) == passes


def test_this_hosts_resources_are_read(tmp_path: Path) -> None:
    here = read_resources()
    assert here.cores >= 1 and here.available_gb > 0
    (tmp_path / "meminfo").write_text("MemTotal: 100 kB\nMemAvailable: 8388608 kB\n")
    assert read_resources(tmp_path / "meminfo").available_gb == 8.0


def test_an_oom_kill_names_a_max_jobs_that_fits() -> None:
    said = oom_message(-9, 16, 4.0, 24.0)
    assert said is not None and "OOM killer" in said and "MAX_JOBS=4" in said
    assert oom_message(137, 2, 4.0, 0.0) is not None
    assert oom_message(1, 16, 4.0, 24.0) is None


def test_the_wheelhouse_wins_then_release_wheels_then_a_build(tmp_path: Path) -> None:
    kernel = KernelSpec(distribution="flash-attn", release_wheels=(FLASH,))
    house = Wheelhouse(tmp_path)
    house.publish(wheel(tmp_path / "b", "flash_attn-2.8.1-cp312-cp312-linux_x86_64.whl"), ENV)
    first = choose(KernelQuery(kernel, "2.8.1", ENV, entries=house.entries(), root=str(tmp_path)))
    assert (
        first.source == "wheelhouse"
        and "lab wheelhouse, built for torch 2.8.0+cu128" in first.reason
    )
    other = BuildKey(**{**ENV.to_json(), "torch": "2.9.0"})
    second = choose(KernelQuery(kernel, "2.8.1", other, entries=house.entries()))
    assert second.source == "release" and second.wheel and "torch2.9cxx11abiFALSE" in second.wheel
    bare = KernelSpec(distribution="flash-attn")
    third = choose(KernelQuery(bare, "2.8.1", other, entries=house.entries()))
    assert third.source == "build"
    assert "only for other builds: torch 2.8.0+cu128" in third.reason
    assert "torch 2.8.0 (env: 2.9.0)" in third.reason


def test_an_index_is_used_only_for_the_key_the_profile_states() -> None:
    stated = {
        "torch": "2.11.0",
        "cuda": "13.0",
        "cxx11abi": "TRUE",
        "python": "cp312",
        "platform": "linux_x86_64",
    }
    kernel = KernelSpec.model_validate(
        {"distribution": "flash-attn", "prebuilt_index": {"index": "lab", "key": stated}}
    )
    env = BuildKey.from_mapping(stated)
    assert choose(KernelQuery(kernel, "2.8.3", env)).source == "index"
    older = BuildKey(**{**env.to_json(), "torch": "2.10.0", "cuda": "12.8"})
    chosen = choose(KernelQuery(kernel, "2.8.3", older))
    assert (
        chosen.source == "build" and "index 'lab' is built for torch 2.11.0+cu130" in chosen.reason
    )


def test_the_pinned_version_is_read_from_the_stage() -> None:
    assert pinned_version(("torch", "flash_attn==2.8.3"), "flash-attn") == "2.8.3"
    assert pinned_version(("flash-attn>=2",), "flash-attn") is None


def test_a_pin_for_another_machine_is_passed_over_for_the_keys_platform() -> None:
    """A stage pins one line per machine (the index's aarch64 wheels of a version may lag):
    the line the installer takes on the key's platform is the one read."""
    te = "transformer-engine[core-cu13,pytorch]"
    lines = (
        f"{te}==2.16.1 ; platform_machine == 'x86_64'",
        f"{te}==2.16.0 ; platform_machine == 'aarch64'",
        f"{te}==2.10.0 ; python_version < '3.12'",
    )
    x86 = BuildKey("2.11.0", "13.0", True, "cp312", "linux_x86_64")
    arm = BuildKey("2.11.0", "13.0", True, "cp312", "linux_aarch64")
    assert pinned_version(lines, "transformer-engine", x86) == "2.16.1"
    assert pinned_version(lines, "transformer-engine", arm) == "2.16.0"
    older = BuildKey("2.11.0", "13.0", True, "cp311", "linux_riscv64")
    assert pinned_version(lines, "transformer-engine", older) == "2.10.0"
    assert pinned_version(lines, "transformer-engine") == "2.16.1"  # no key: the first line


@pytest.mark.parametrize(("marked", "abi"), [(True, True), (False, False)])
def test_the_key_probe_reads_torch_without_importing_it(
    tmp_path: Path, marked: bool, abi: bool
) -> None:
    torch = tmp_path / "torch"
    (torch / "lib").mkdir(parents=True)
    (torch / "__init__.py").write_text("raise ImportError('the probe must not import torch')\n")
    (torch / "version.py").write_text("__version__ = '2.9.1+cu128'\ncuda = '12.8'\n")
    symbol = b"_ZN3c104Type3strB5cxx11Ev NSt7__cxx1112basic_string" if marked else b"_ZN3c10Ss"
    (torch / "lib" / "libc10.so").write_bytes(b"\x7fELF" + symbol)
    probe = Path(__file__).parents[1] / "verl_bootstrap" / "probes" / "build_key.py"
    done = subprocess.run(
        [sys.executable, str(probe)],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    key = BuildKey.from_mapping(json.loads(done.stdout))
    assert (key.torch, key.cuda, key.cxx11abi) == ("2.9.1", "12.8", abi)
    assert key.python == f"cp{sys.version_info[0]}{sys.version_info[1]}"


def test_build_progress_counts_ninja_and_compiler_lines() -> None:
    from verl_bootstrap.events import Event, listening  # noqa: PLC0415
    from verl_bootstrap.kernels.progress import BuildProgress  # noqa: PLC0415

    seen: list[Event] = []
    ticks = iter([0.0, 4.0, 9.0, 12.0])
    watch = BuildProgress("flash-attn", "flash-attn", clock=lambda: next(ticks))
    with listening(seen.append):
        watch("[1/72] /usr/local/cuda/bin/nvcc -c csrc/flash_fwd.cu -o flash_fwd.o")
        watch("copying flash_attn/__init__.py -> build/lib")
        watch("[2/72] /usr/local/cuda/bin/nvcc -c csrc/flash_bwd.cu -o flash_bwd.o")
        serial = BuildProgress("standin", "standin-kernel", clock=lambda: 12.0)
        serial("x86_64-linux-gnu-g++ -pthread -fPIC -I/env/include -c csrc/standin.cpp -o b/s.o")
    assert [(e.data["units"], e.data["total"], e.data["seconds"]) for e in seen] == [
        (1, 72, 4.0),
        (2, 72, 9.0),
        (1, None, 0.0),
    ]
    assert seen[1].message == "flash-attn: 2/72 compiled unit(s), 9s"
    assert all(e.kind == ("progress", "build") for e in seen)


def test_a_locked_kernel_takes_the_recorded_file_or_builds_the_locked_sdist(tmp_path: Path) -> None:
    from verl_bootstrap.kernels.host import Bundled  # noqa: PLC0415
    from verl_bootstrap.kernels.wheelhouse import entry_for  # noqa: PLC0415
    from verl_bootstrap.lock.format import KernelWheel, LockedDist  # noqa: PLC0415

    kernel = KernelSpec(distribution="flash-attn", release_wheels=(FLASH,))
    url = "https://releases.example/v2.8.1/flash_attn-2.8.1+cu12torch2.8cxx11abiFALSE-cp312-cp312-linux_x86_64.whl"
    recorded = KernelWheel(
        file=url.rsplit("/", 1)[-1],
        sha256="a" * 64,
        source="release",
        url=url,
        key={
            "torch": "2.8",
            "cuda": "12",
            "cxx11abi": False,
            "python": "cp312",
            "platform": "linux_x86_64",
        },
    )
    dist = LockedDist(name="flash-attn", version="2.8.1", source="sdist", hashes=("b" * 64,))
    house = Wheelhouse(tmp_path)
    other = house.publish(
        wheel(tmp_path / "in", "flash_attn-2.8.1-cp312-cp312-linux_x86_64.whl"), ENV
    )

    def choose_locked(
        dist: LockedDist, key: BuildKey, entries: tuple[Entry, ...], root: str | None = None
    ) -> KernelChoice:
        """The first candidate of the locked route (with `bundle` once it is made)."""
        pins = LockPins(dist, bundle=bundle)
        return choose(KernelQuery(kernel, dist.version, key, entries=entries, root=root, lock=pins))

    bundle: Bundled | None = None
    by_key = choose_locked(dist, ENV, house.entries(), str(tmp_path))
    assert (by_key.source, by_key.sha256) == ("wheelhouse", other.sha256)
    with_record = dist.model_copy(update={"kernel_wheel": recorded})
    release = choose_locked(with_record, ENV, house.entries(), str(tmp_path))
    assert (release.source, release.wheel, release.sha256) == ("release", url, "a" * 64)
    newer = BuildKey(
        torch="2.9.0", cuda="12.8", cxx11abi=True, python="cp312", platform="linux_x86_64"
    )
    build = choose_locked(with_record, newer, house.entries(), str(tmp_path))
    assert build.source == "build"
    assert build.reason.startswith("source build of the locked sdist: the lockfile's flash_attn")
    # a bundle that carries the recorded file comes first (nothing is downloaded); for another
    # key it is not taken either
    bundle = Bundled(tmp_path / "bundle", (entry_for(recorded.file, "a" * 64, ENV),))
    carried = choose_locked(with_record, ENV, house.entries())
    assert (carried.source, carried.wheel) == ("bundle", str(tmp_path / "bundle" / recorded.file))
    assert carried.reason.startswith("prebuilt from the bundle, key torch 2.8+cu12")
    assert choose_locked(with_record, newer, ()).source == "build"


def test_a_threads_variable_no_build_reads_is_refused() -> None:
    from pydantic import ValidationError  # noqa: PLC0415

    assert KernelSpec(distribution="flash-attn", threads_variable="NVCC_THREADS").threads_variable
    with pytest.raises(ValidationError, match="must be one of NVCC_THREADS"):
        KernelSpec(distribution="flash-attn", threads_variable="THREADS")
