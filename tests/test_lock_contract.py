"""A lockfile meets its own metadata and verl's whole `[tool.uv]` contract (`lock --check`).

verl's real v0.9.1 pyproject.toml (its release sdist from the default index) states the contract;
the committed GPU lockfiles are checked against it, and lockfiles edited the ways the earlier
committed ones were wrong (compressed-tensors 0.20.1 beside torch 2.9.1; nvidia-cusparselt-cu13
0.8.0 on aarch64, where verl overrides it to 0.9.1) are caught. The metadata check is uv's own
resolution of the lock's pins against the default index.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from verlrepo import verl_sdist

from verl_bootstrap.lock.fit import Wanted, why_not
from verl_bootstrap.lock.format import CondaPackage, Lockfile, profile_hash
from verl_bootstrap.lock.gaps import LABELS, gap_kinds
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.lockroute import route_line
from verl_bootstrap.lock.making.contract import MetadataCheck, contract_gaps, metadata_gaps
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import LOCKFILES_DIR
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.profile.verlextras import marker_env, stage_pins, verl_overrides

GPU_LOCKS = sorted(p for p in LOCKFILES_DIR.glob("*/*.lock.yaml") if p.parent.name != "cpu")
# the default index alone: this machine's own pip settings shape no check
DEFAULT_INDEX = IndexSettings()


@pytest.fixture(scope="module")
def pyproject(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.9.1's own pyproject.toml, from its release sdist."""
    dest = tmp_path_factory.mktemp("verl-091")
    with tarfile.open(verl_sdist("0.9.1")) as tar:
        member = tar.getmember("verl-0.9.1/pyproject.toml")
        member.name = "pyproject.toml"
        tar.extractall(dest, members=[member], filter="data")
    return dest / "pyproject.toml"


def _edited(source: Path, dest: Path, version: tuple[str, str] | None = None) -> Lockfile:
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    for stage in data["stages"]:
        for dist in stage["distributions"]:
            if version and dist["name"] == version[0]:
                dist["version"] = version[1]
    dest.write_text(yaml.safe_dump(data), encoding="utf-8")
    return read_lockfile(dest)


def _without(profile: Profile, name: str) -> Profile:
    subs = tuple(s for s in profile.substitutions if s.replace != name)
    return profile.model_copy(update={"substitutions": subs})


@pytest.mark.parametrize("path", GPU_LOCKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_gpu_lock_keeps_verls_contract(path: Path, pyproject: Path) -> None:
    lock = read_lockfile(path)
    assert contract_gaps(lock, load_profile(lock.profile), pyproject) == []


@pytest.mark.parametrize("path", GPU_LOCKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_gpu_locks_are_made_for_the_profiles_backend(path: Path) -> None:
    lock = read_lockfile(path)
    assert lock.backend == load_profile(lock.profile).env.backend == "conda"
    # conda channels are unreachable where these were made: the conda part is a named gap
    assert lock.conda or (lock.conda_gap and "conda-forge" in lock.conda_gap)


def test_aarch64_cusparselt_against_verls_override(tmp_path: Path, pyproject: Path) -> None:
    source = LOCKFILES_DIR / "fsdp" / "cu130-linux-aarch64.lock.yaml"
    locked = read_lockfile(source).distributions()
    assert locked["nvidia-cusparselt-cu13"].version == "0.9.1"  # verl's aarch64 override
    old = _edited(source, tmp_path / "a.lock.yaml", version=("nvidia-cusparselt-cu13", "0.8.0"))
    gaps = contract_gaps(old, load_profile("fsdp"), pyproject)
    assert gaps == [
        "pins nvidia-cusparselt-cu13==0.8.0, verl overrides it to "
        "\"nvidia-cusparselt-cu13==0.9.1 ; platform_machine == 'aarch64' and sys_platform == "
        "'linux'\""
    ]


def test_a_source_verl_names_needs_a_stated_substitution(pyproject: Path) -> None:
    lock = read_lockfile(LOCKFILES_DIR / "megatron" / "cu130-linux-64.lock.yaml")
    profile = _without(load_profile("megatron"), "megatron-core")
    assert contract_gaps(lock, profile, pyproject) == [
        "takes megatron-core 0.18.0 from default, verl from git "
        "https://github.com/NVIDIA/Megatron-LM.git at core_v0.18.0"
    ]
    profile = _without(load_profile("megatron"), "flash-attn")
    assert contract_gaps(lock, profile, pyproject) == [
        "takes flash-attn 2.8.3 from the default index, verl from its index 'verl-wheelhouse'"
    ]


def test_a_deps_free_install_keeps_the_version_verl_states(tmp_path: Path, pyproject: Path) -> None:
    source = LOCKFILES_DIR / "megatron" / "cu130-linux-64.lock.yaml"
    moved = _edited(source, tmp_path / "m.lock.yaml", version=("megatron-core", "0.18.1"))
    assert contract_gaps(moved, load_profile("megatron"), pyproject) == [
        "pins megatron-core==0.18.1, verl's dependency-metadata is for 0.18.0 (installed "
        "without its own dependencies)"
    ]


def test_conflicting_extras_are_refused(pyproject: Path) -> None:
    lock = read_lockfile(LOCKFILES_DIR / "vllm-only" / "cu130-linux-64.lock.yaml")
    profile = load_profile("vllm-only")
    stages = tuple(
        s.model_copy(update={"extras": ("vllm", "sglang")}) if s.kind == "verl-deps" else s
        for s in profile.stages
    )
    gaps = contract_gaps(lock, profile.model_copy(update={"stages": stages}), pyproject)
    assert "asks verl's extras sglang, vllm, which verl declares as conflicting" in gaps


def test_megatron_is_verls_pairing() -> None:
    lock = read_lockfile(LOCKFILES_DIR / "megatron" / "cu130-linux-64.lock.yaml")
    locked = lock.distributions()
    assert locked["megatron-core"].version == "0.18.0"
    assert locked["megatron-bridge"].version.startswith("0.5.")
    bridge = next(s for s in lock.stages if s.id == "megatron-bridge")
    assert [d.name for d in bridge.distributions] == ["megatron-bridge"]  # deps-free, as verl


@pytest.mark.parametrize("variant", ["cu128", "cu130"])
def test_no_stage_overrides_what_verl_does_not(variant: str, pyproject: Path) -> None:
    """A substitution is asked for, never forced: only verl's own overrides (and the drops of
    what a later stage installs) are overrides."""
    verl = {Requirement(o).name for o in verl_overrides(pyproject)}
    for spec in stage_specs(load_profile("sglang"), variant):
        pinned = stage_pins(spec, pyproject.parent, marker_env("3.12", "linux-64"))
        names = {Requirement(o).name for o in pinned.overrides}
        assert names <= verl, (spec.id, names - verl)


def test_pins_that_break_their_metadata_are_caught(tmp_path: Path, pyproject: Path) -> None:
    source = LOCKFILES_DIR / "sglang" / "cu128-linux-64.lock.yaml"
    broken = _edited(source, tmp_path / "s.lock.yaml", version=("compressed-tensors", "0.20.1"))
    (tmp_path / "work").mkdir()
    check = MetadataCheck(DEFAULT_INDEX, tmp_path / "work")
    [gap] = metadata_gaps(broken, load_profile("sglang"), pyproject, check)
    assert gap.startswith("its pins break their own metadata:")
    assert "compressed-tensors" in gap and "torch>=2.10.0" in gap and "torch==2.9.1" in gap


def test_a_committed_lock_meets_its_metadata_deps_free_installs_excepted(
    tmp_path: Path, pyproject: Path
) -> None:
    """megatron-bridge is installed without its dependencies (as verl installs it): its own
    Requires-Dist (NeMo's stack) is not asked of the lock."""
    lock = read_lockfile(LOCKFILES_DIR / "megatron" / "cu130-linux-64.lock.yaml")
    check = MetadataCheck(DEFAULT_INDEX, tmp_path)
    assert metadata_gaps(lock, load_profile("megatron"), pyproject, check) == []


def test_a_lock_lacking_a_dependency_names_who_requires_it(tmp_path: Path, pyproject: Path) -> None:
    source = LOCKFILES_DIR / "vllm-only" / "cu130-linux-64.lock.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    for stage in data["stages"]:
        stage["distributions"] = [d for d in stage["distributions"] if d["name"] != "aiosignal"]
    (tmp_path / "v.lock.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    lock = read_lockfile(tmp_path / "v.lock.yaml")
    check = MetadataCheck(DEFAULT_INDEX, tmp_path)
    assert metadata_gaps(lock, load_profile("vllm-only"), pyproject, check) == [
        "lacks aiosignal, which aiohttp requires"
    ]


def _wanted(lock: Lockfile, backend: str) -> Wanted:
    profile = load_profile(lock.profile)
    return Wanted(
        profile=lock.profile,
        profile_hash=profile_hash(profile, lock.cuda.variant),
        variant=lock.cuda.variant,
        platform=lock.platform,
        ref=lock.verl.ref,
        pythons=None,
        glibc="2.36",
        backend=backend,
    )


def test_a_lock_made_for_another_backend_does_not_fit() -> None:
    lock = read_lockfile(LOCKFILES_DIR / "sglang" / "cu128-linux-64.lock.yaml")
    assert why_not(lock, _wanted(lock, "conda")) is None  # the profile's own backend
    venv_lock = lock.model_copy(update={"backend": "venv"})
    assert why_not(venv_lock, _wanted(lock, "conda")) == (
        "was made for the venv backend; this run makes a conda env"
    )


def test_the_unlocked_conda_part_is_a_named_gap() -> None:
    lock = read_lockfile(LOCKFILES_DIR / "sglang" / "cu128-linux-64.lock.yaml")
    kinds = gap_kinds(lock, installer="uv", conda_exe=False)
    [(kind, line)] = [k for k in kinds if k[0] == "conda-unlocked"]
    assert "the conda packages of the env" in line and "conda-forge" in line
    route = route_line(Path("x.lock.yaml"), lock.exclude_newer, "", gaps=[LABELS[kind]])
    assert route.endswith("hash-checked but for 1 gap(s): the conda packages (not locked))")
    # a conda lock that holds its conda packages has no such gap
    whole = lock.model_copy(update={"conda_gap": None, "conda": (_python_package(),)})
    assert "conda-unlocked" not in [k for k, _ in gap_kinds(whole, installer="uv", conda_exe=False)]


def _python_package() -> CondaPackage:
    return CondaPackage(
        name="python",
        version="3.12.8",
        build="h9e4cc4f_1_cpython",
        channel="conda-forge",
        subdir="linux-64",
        filename="python-3.12.8-h9e4cc4f_1_cpython.conda",
        sha256="c" * 64,
    )
