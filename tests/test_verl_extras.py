"""The GPU profiles take verl's own backend extras, read from verl's real v0.9.1 pyproject.toml
(its release sdist from the default index), and `lock --check` names every distribution those
extras declare that a committed lockfile lacks or pins otherwise."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from scaffold import run_cli
from verlrepo import verl_sdist

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.kernels.coverage import stack_keys
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.declared import extras_gaps
from verl_bootstrap.paths import LOCKFILES_DIR
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.profile.stagespec import DROPPED_MARKER, stage_specs
from verl_bootstrap.profile.verlextras import (
    declared_requirements,
    extras_lines,
    marker_env,
    read_extras,
    stage_pins,
)
from verl_bootstrap.verify.env import needs_ffmpeg, verify_env

GPU_LOCKS = sorted(p for p in LOCKFILES_DIR.glob("*/*.lock.yaml") if p.parent.name != "cpu")
X86 = marker_env("3.12", "linux-64")


@pytest.fixture(scope="module")
def verl_091(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.9.1's own checkout files: pyproject.toml from its release sdist."""
    dest = tmp_path_factory.mktemp("verl-091")
    with tarfile.open(verl_sdist("0.9.1")) as tar:
        member = tar.getmember("verl-0.9.1/pyproject.toml")
        member.name = "pyproject.toml"
        tar.extractall(dest, members=[member], filter="data")
    return dest


def _declared(checkout: Path, *extras: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in declared_requirements(read_extras(checkout / "pyproject.toml"), extras, X86):
        out.setdefault(item.name, []).append(item.requirement)
    return out


def test_extras_expand_through_verl_self_references(verl_091: Path) -> None:
    found = _declared(verl_091, "fsdp", "vllm")
    assert found["cupy-cuda13x"] == ["cupy-cuda13x==14.0.1"]  # via verl[cupy-cu130]
    assert found["flash-attn"] == ["flash-attn==2.8.3"]  # via verl[flash-attn-cu130torch211]
    assert found["torchcodec"] == ["torchcodec"]  # via verl[verl-core]
    assert found["vllm"] == ["vllm==0.24.0"]
    assert "verl" not in found
    assert "sglang" not in found


def test_unknown_extra_names_the_ones_verl_declares(verl_091: Path) -> None:
    with pytest.raises(InputError, match=r"no extra 'megatorn'.*fsdp.*megatron"):
        _declared(verl_091, "megatorn")


def test_markers_hold_for_the_locked_platform(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "verl"\n[project.optional-dependencies]\n'
        'arm = ["only-arm ; platform_machine == \'aarch64\'", "both"]\n',
        encoding="utf-8",
    )
    table = read_extras(tmp_path / "pyproject.toml")
    on_x86 = {d.name for d in declared_requirements(table, ["arm"], X86)}
    on_arm = {
        d.name for d in declared_requirements(table, ["arm"], marker_env("3.12", "linux-aarch64"))
    }
    assert (on_x86, on_arm) == ({"both"}, {"both", "only-arm"})


def test_engine_takes_verl_pins_and_the_variants_substitutions(verl_091: Path) -> None:
    def engine(profile: str, variant: str) -> tuple[str, ...]:
        spec = next(s for s in stage_specs(load_profile(profile), variant) if s.id == "engine")
        return stage_pins(spec, verl_091, X86).packages

    assert engine("fsdp", "cu130") == (
        "vllm==0.24.0",
        "torch==2.11.0",
        "torchvision==0.26.0",
        "torchaudio==2.11.0",
        "transformers==5.9.0",
    )
    assert engine("fsdp", "cu128")[:2] == ("vllm==0.19.1", "torch==2.10.0")
    assert engine("sglang", "cu128")[0] == "sglang==0.5.10.post1"


def test_deps_stage_leaves_later_stages_their_packages_and_substitutes(verl_091: Path) -> None:
    specs = {s.id: s for s in stage_specs(load_profile("megatron"), "cu128")}
    deps = stage_pins(specs["verl-deps"], verl_091, X86)
    assert deps.extras == ("megatron", "vllm")
    assert set(deps.excluded) == {
        "flash-attn",
        "transformer-engine",
        "megatron-core",
        "megatron-bridge",
    }
    # the substitutes are asked for in place of verl's pins, never as overrides (an override
    # of torch would erase every dependency's own torch bound)
    assert "torch==2.10.0" in deps.verl_lines
    assert "cupy-cuda12x==14.0.1" in deps.verl_lines
    assert not [line for line in deps.verl_lines if line.startswith(("cupy-cuda13x", "apex"))]
    assert not [o for o in deps.overrides if o.startswith(("torch", "cupy", "apex"))]
    assert "transformers==5.9.0" in deps.overrides  # verl's own override-dependencies
    assert specs["megatron-bridge"].no_deps
    cu130 = {s.id: s for s in stage_specs(load_profile("megatron"), "cu130")}["verl-deps"]
    cu130 = stage_pins(cu130, verl_091, X86)
    assert "torch==2.11.0" in cu130.verl_lines
    assert "cupy-cuda13x==14.0.1" in cu130.verl_lines


def test_cpu_profile_is_left_as_it_was() -> None:
    deps = next(s for s in stage_specs(load_profile("cpu"), "cpu") if s.kind == "verl-deps")
    assert deps.extras == ("verl-core",)
    assert deps.substitutions == ()
    assert not any(DROPPED_MARKER in o for o in deps.overrides)


def test_plan_lines_say_which_extras_and_from_where(verl_091: Path) -> None:
    specs = {s.id: s for s in stage_specs(load_profile("fsdp"), "cu128")}
    deps = "\n".join(extras_lines(specs["verl-deps"], verl_091))
    assert f"takes verl[fsdp,vllm] as declared in {verl_091 / 'pyproject.toml'}" in deps
    assert "left to later stages: flash-attn" in deps
    assert "instead of verl's cupy-cuda13x: cupy-cuda12x==14.0.1 (" in deps
    engine = "\n".join(extras_lines(specs["engine"], verl_091))
    assert "vllm==0.24.0 (verl[vllm])" in engine
    assert "(read once verl is fetched)" in "\n".join(extras_lines(specs["engine"], Path("/no")))


@pytest.mark.parametrize("path", GPU_LOCKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_committed_gpu_lock_holds_verls_extras(path: Path, verl_091: Path) -> None:
    lock = read_lockfile(path)
    gaps = extras_gaps(lock, load_profile(lock.profile), verl_091 / "pyproject.toml")
    assert [g.line() for g in gaps] == []


def _edited(
    source: Path, dest: Path, drop: str | None = None, version: tuple[str, str] | None = None
) -> Path:
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    for stage in data["stages"]:
        stage["distributions"] = [d for d in stage["distributions"] if d["name"] != drop]
        for dist in stage["distributions"]:
            if version and dist["name"] == version[0]:
                dist["version"] = version[1]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(data), encoding="utf-8")
    return dest


def test_a_lock_that_lacks_or_moves_one_fails(tmp_path: Path, verl_091: Path) -> None:
    source = LOCKFILES_DIR / "fsdp" / "cu130-linux-64.lock.yaml"
    pyproject = verl_091 / "pyproject.toml"
    lacking = read_lockfile(_edited(source, tmp_path / "a.lock.yaml", drop="torchcodec"))
    gaps = extras_gaps(lacking, load_profile("fsdp"), pyproject)
    assert [g.line() for g in gaps] == ["lacks torchcodec (verl[fsdp] > verl[verl-core])"]
    moved = read_lockfile(_edited(source, tmp_path / "b.lock.yaml", version=("trl", "0.26.0")))
    gaps = extras_gaps(moved, load_profile("fsdp"), pyproject)
    assert [g.line() for g in gaps] == ["pins trl==0.26.0, verl declares trl==0.27.0 (verl[fsdp])"]
    cu128 = LOCKFILES_DIR / "fsdp" / "cu128-linux-64.lock.yaml"
    no_substitute = read_lockfile(_edited(cu128, tmp_path / "c.lock.yaml", drop="cupy-cuda12x"))
    gaps = extras_gaps(no_substitute, load_profile("fsdp"), pyproject)
    assert [g.line() for g in gaps] == [
        "lacks cupy-cuda12x==14.0.1 (instead of cupy-cuda13x==14.0.1 of verl[fsdp] > "
        "verl[cupy-cu130])"
    ]


@pytest.mark.real_slow  # a real lock against the index (about a minute)
def test_lock_check_names_what_a_lock_lacks(tmp_path: Path, verl_repo_session: Path) -> None:
    folder = tmp_path / "lockfiles"
    _edited(
        LOCKFILES_DIR / "vllm-only" / "cu130-linux-64.lock.yaml",
        folder / "vllm-only" / "cu130-linux-64.lock.yaml",
        drop="qwen-vl-utils",
    )
    run = run_cli(
        ["lock", "--check", "--dir", str(folder), "--verl-source", str(verl_repo_session), "--json"]
    )
    assert run.code == 1
    [entry] = run.body["lockfiles"]
    assert entry["verl_extras"] == ["lacks qwen_vl_utils (verl[vllm] > verl[verl-core])"]


PINNED_PROFILE = """\
schema_version: 1
name: pins-here
extends: cpu
stages:
  - id: torch
    packages: ["torch==2.13.0"]
    index: pytorch-cpu
  - id: early
    packages: [tensordict, pylatexenc]
    pins_from_verl: true
  - id: verl-deps
    kind: verl-deps
    extras: [verl-core]
  - id: later
    packages: ["codetiming==1.3.2"]
substitutions:
  - replace: nvtx
    reason: left out by this test
"""


@pytest.mark.real_slow  # a real install
def test_a_real_install_takes_verls_pins_and_leaves_later_stages_theirs(
    tmp_path: Path, verl_repo_session: Path
) -> None:
    profile = tmp_path / "pins-here.yaml"
    profile.write_text(PINNED_PROFILE, encoding="utf-8")
    prefix = tmp_path / "env"
    run = run_cli(
        [
            "--profile",
            str(profile),
            "--prefix",
            str(prefix),
            "--verl-source",
            str(verl_repo_session),
            "--json",
        ]
    )
    assert run.code == 0, run.stderr
    logs = {
        s["id"]: Path(s["log"]).read_text("utf-8")
        for s in run.body["steps"]
        if s["id"] in ("early", "verl-deps", "later")
    }
    # the stage asked for verl-core's own requirement, read from the checkout's pyproject.toml
    assert "'tensordict!=0.9.0,<=0.10.0,>=0.8.0' pylatexenc" in logs["early"]
    overrides = (prefix / ".verl-bootstrap" / "overrides" / "verl-deps.txt").read_text("utf-8")
    assert f"codetiming ; {DROPPED_MARKER}" in overrides.splitlines()  # a later stage's
    # the substitution leaves verl's nvtx out of what the stage asks for: no override
    assert f"nvtx ; {DROPPED_MARKER}" not in overrides.splitlines()
    assert " nvtx" not in logs["verl-deps"].split("\n", 1)[0]
    assert " + codetiming" not in logs["verl-deps"]
    assert " + codetiming==1.3.2" in logs["later"]
    final = installed(prefix)
    assert final["codetiming"].version == "1.3.2"
    assert "nvtx" not in final
    assert final["tensordict"].version in SpecifierSet(">=0.8.0,<=0.10.0,!=0.9.0")
    assert "msgspec" in final  # the rest of verl-core came with the deps stage


@pytest.mark.parametrize(
    ("profile", "variant", "torch"), [("fsdp", "cu130", "2.11.0"), ("sglang", "cu128", "2.9.1")]
)
def test_kernel_keys_know_the_engines_torch_before_verl_is_fetched(
    profile: str, variant: str, torch: str
) -> None:
    # the engine names torch bare (verl's pin); the torch it promises keys the kernel stages
    keys = stack_keys(load_profile(profile), variant, "linux_x86_64")
    assert [(stage, key.torch) for stage, _, _, key in keys] == [("flash-attn", torch)]


def test_torchcodec_without_ffmpeg_is_named_a_host_library_not_a_broken_env(
    tmp_path: Path,
) -> None:
    # a real import that opens FFmpeg's library as torchcodec does (this host has no FFmpeg)
    prefix = tmp_path / "env"
    subprocess.run([uv_binary(), "venv", "-q", str(prefix)], check=True)
    (site,) = prefix.glob("lib/python3*/site-packages")
    (site / "opens_libavutil.py").write_text("import ctypes\nctypes.CDLL('libavutil.so.60')\n")
    report = verify_env(prefix, VerifySpec(imports=("opens_libavutil",), gpu_smoke=False))
    (check,) = [c for c in report.checks if c.name == "import opens_libavutil"]
    assert check.status == "skipped"
    assert "needs FFmpeg's shared libraries" in check.detail
    assert report.ok
    # torchcodec's own error on such a host (recorded from the fsdp cu130 env); an ABI mismatch
    # with torch says "undefined symbol" and stays a failure
    recorded = (Path(__file__).parent / "data" / "torchcodec-no-ffmpeg.txt").read_text("utf-8")
    assert needs_ffmpeg(recorded)
    assert not needs_ffmpeg(
        recorded + "\nOSError: libtorchcodec_core7.so: undefined symbol: _ZN3c10"
    )
