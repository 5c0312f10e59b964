"""The plan of a kernel stage: which source it takes and why, and the variables that size its
build, from recorded GPUs (tests/data/nvidia/) and given cores and memory."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from verl_bootstrap import cli
from verl_bootstrap.cli.planview import plan_json, plan_text
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.kernels.sizing import HostResources
from verl_bootstrap.kernels.wheelhouse import Wheelhouse
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.gpu.query import parse_query_gpus
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.facts import HostFacts, gather_host
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.variants import choose_variant
from verl_bootstrap.run.compiler.compile import compile_plan

NVIDIA = Path(__file__).parent / "data" / "nvidia"
H100 = "590.48.01-H100-MIG-csv.txt"  # compute capability 9.0
L40S = "595.80-L40S-csv.txt"  # 8.9
RTX2080S = "610.57.04-RTX2080S-csv.txt"  # 7.5


def driver(*fixtures: str) -> DriverInfo:
    """A 590 driver (CUDA 13.1) with the GPUs of the recorded `--query-gpu` outputs."""
    gpus = [g for f in fixtures for g in parse_query_gpus((NVIDIA / f).read_text("utf-8"))]
    numbered = tuple(replace(g, index=i) for i, g in enumerate(gpus))
    return DriverInfo(version="590.48.01", cuda="13.1", source="test", gpus=numbered)


def host(
    profile: str, tmp_path: Path, found: DriverInfo | None, cores: int, ram: float, **opts: object
) -> tuple[RunOptions, HostFacts]:
    options = RunOptions(profile=profile, prefix=tmp_path / "env", **opts)  # type: ignore[arg-type]
    chosen = load_profile(profile)
    variant = choose_variant(chosen, found, options.cuda)  # as the plan chooses it, once
    facts = gather_host(chosen, options, driver=found, variant=variant, check_optional=False)
    assert facts.kernels is not None
    kernels = replace(facts.kernels, resources=HostResources(cores, ram), preset={})
    return options, replace(facts, kernels=kernels)


def plan_for(profile: str, options: RunOptions, facts: HostFacts) -> Plan:
    return compile_plan(load_profile(profile), options, facts)


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MAX_JOBS", raising=False)


def test_an_h100_host_builds_flash_attn_for_9_0_with_jobs_its_memory_holds(tmp_path: Path) -> None:
    options, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=24.0)
    # a site that trusts only itself and upstream: flash-attn's own releases stop at torch 2.8
    assert facts.kernels is not None
    facts = replace(facts, kernels=replace(facts.kernels, order=("wheelhouse", "official")))
    plan = plan_for("fsdp", options, facts)
    step = plan.step("flash-attn")
    assert step.env["FLASH_ATTN_CUDA_ARCHS"] == "90"
    assert step.env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert step.env["MAX_JOBS"] == "6"  # 24 GB at 4 GB a job, fewer than 16 cores
    assert step.env["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"  # the profile's own variable
    kernel = next(s for s in plan_json(plan)["steps"] if s["id"] == "flash-attn")["kernel"]
    assert kernel["source"] == "build"
    assert kernel["expected_key"] == {
        "torch": "2.11.0",
        "cuda": "13.0",
        "cxx11abi": True,
        "python": "cp312",
        "platform": facts.kernels.platform if facts.kernels else None,
    }
    assert "official has flash-attn 2.8.3 for no build of torch 2.11.0+cu130" in kernel["reason"]
    assert kernel["cuda_archs"] == ["9.0"] and kernel["max_jobs"] == 6
    assert "\nbuild: about 45 min on this host" in step.description  # 17 x 16 / 6
    assert step.env["NVCC_THREADS"] == "1"  # one architecture pass per job: 4 GB a job holds


def test_a_threads_count_the_user_exported_is_kept_and_sizes_each_jobs_memory(
    tmp_path: Path,
) -> None:
    """flash-attn runs NVCC_THREADS architecture passes per job (each about 3.4 GB, measured):
    four at once for the default list need four times a pass's memory per job."""
    options, facts = host("fsdp", tmp_path, None, cores=16, ram=24.0, cuda="cu130")
    assert facts.kernels is not None
    facts = replace(facts, kernels=replace(facts.kernels, preset={"NVCC_THREADS": "4"}))
    step = plan_for("fsdp", options, facts).step("flash-attn")
    assert "NVCC_THREADS" not in step.env  # the user's own value reaches the build
    assert step.env["MAX_JOBS"] == "1"  # 24 GB at 4 passes x 4 GB a job
    options, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=24.0)
    facts = replace(facts, kernels=replace(facts.kernels, preset={"NVCC_THREADS": "4"}))
    assert plan_for("fsdp", options, facts).step("flash-attn").env["MAX_JOBS"] == "6"  # 1 arch


def test_mixed_gpus_and_many_cores_give_every_arch_and_more_jobs(tmp_path: Path) -> None:
    # cu128: its TransformerEngine (2.12.0) has no prebuilt wheel, so the stage builds
    gpus = driver(L40S, H100, RTX2080S)
    options, facts = host("megatron", tmp_path, gpus, cores=64, ram=512.0, cuda="cu128")
    plan = plan_for("megatron", options, facts)
    flash, te = plan.step("flash-attn"), plan.step("transformer-engine")
    assert flash.env["FLASH_ATTN_CUDA_ARCHS"] == "75;89;90"
    # TransformerEngine's extension is host code alone: no architecture list is passed to it
    assert "NVTE_CUDA_ARCHS" not in te.env and "TORCH_CUDA_ARCH_LIST" not in te.env
    assert flash.env["MAX_JOBS"] == te.env["MAX_JOBS"] == "64"
    assert flash.env["NVCC_THREADS"] == "1" and "NVCC_THREADS" not in te.env
    assert "pins no exact version of transformer-engine-torch" in te.description


def test_the_cu128_variant_expects_torch_2_10(tmp_path: Path) -> None:
    options, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=64.0, cuda="cu128")
    kernel = plan_for("fsdp", options, facts).kernels["flash-attn"]
    assert kernel.key.describe().startswith("torch 2.10.0+cu128, cp312, cxx11abi")
    # flash-attn's own releases stop at torch 2.8: the community wheelhouse has this build
    assert "/v0.9.0/flash_attn-2.8.3+cu128torch2.10-cp312-cp312-" in (kernel.choice.wheel or "")


def test_a_matching_wheel_in_the_wheelhouse_wins(tmp_path: Path) -> None:
    options, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=64.0)
    assert facts.kernels is not None
    wheel = tmp_path / "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("flash_attn/__init__.py", "")
    key = plan_for("fsdp", options, facts).kernels["flash-attn"].key
    entry = Wheelhouse(facts.kernels.wheelhouse).publish(wheel, key)
    options, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=64.0)
    plan = plan_for("fsdp", options, facts)
    assert plan.kernels["flash-attn"].choice.source == "wheelhouse"
    text = plan_text(plan)
    assert (
        "kernel: prebuilt from the lab wheelhouse, built for torch 2.11.0+cu130, cp312, "
        f"cxx11abi, {key.platform}, sha256 {entry.sha256[:12]}…"
    ) in text


def test_a_login_node_uses_the_sites_archs_or_says_it_has_none(tmp_path: Path) -> None:
    from verl_bootstrap.options import SiteOptions  # noqa: PLC0415

    site = SiteOptions(cuda_arch=("9.0", "10.0"))
    options, facts = host("fsdp", tmp_path, None, cores=8, ram=32.0, cuda="cu130", site=site)
    step = plan_for("fsdp", options, facts).step("flash-attn")
    assert step.env["FLASH_ATTN_CUDA_ARCHS"] == "90;100"
    options, facts = host("fsdp", tmp_path, None, cores=8, ram=32.0, cuda="cu130")
    plan = plan_for("fsdp", options, facts)
    assert "FLASH_ATTN_CUDA_ARCHS" not in plan.step("flash-attn").env
    assert plan.kernels["flash-attn"].sizing.arch_reason.startswith(
        "no GPU seen and no --cuda-arch"
    )


def test_a_max_jobs_the_user_exported_is_kept(tmp_path: Path) -> None:
    options, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=64.0)
    assert facts.kernels is not None
    facts = replace(facts, kernels=replace(facts.kernels, preset={"MAX_JOBS": "2"}))
    plan = plan_for("fsdp", options, facts)
    assert plan.step("flash-attn").env["MAX_JOBS"] == "2"
    assert plan.kernels["flash-attn"].sizing.jobs_reason == "from $MAX_JOBS"


def test_the_cli_plan_shows_cuda_arch_and_each_steps_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "plan",
        "--profile",
        "fsdp",
        "--prefix",
        str(tmp_path / "env"),
        "--cuda",
        "cu130",
        "--cuda-arch",
        "8.0,9.0",
    ]
    assert cli.main([*argv, "--json"]) == EXIT_OK
    steps = {s["id"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["flash-attn"]["env"]["FLASH_ATTN_CUDA_ARCHS"] == "80;90"
    assert steps["flash-attn"]["kernel"]["cuda_archs_reason"] == "from --cuda-arch"
    assert steps["engine"]["env"] == {} and "kernel" not in steps["engine"]
    assert cli.main(argv) == EXIT_OK
    text = capsys.readouterr().out  # the lockfile's variable said once, the host's after it
    assert "   the lockfile sets: FLASH_ATTENTION_FORCE_BUILD=TRUE, and MAX_JOBS, which" in text
    assert "   env: FLASH_ATTN_CUDA_ARCHS='80;90' MAX_JOBS=" in text
    assert cli.main([*argv[:-1], "sm_90"]) == EXIT_BAD_INPUT
    assert "'sm_90' is not a CUDA architecture" in capsys.readouterr().err


def test_sizing_does_not_change_a_steps_fingerprint(tmp_path: Path) -> None:
    options, small = host("fsdp", tmp_path, driver(H100), cores=4, ram=8.0)
    _, large = host("fsdp", tmp_path, driver(H100), cores=64, ram=512.0)
    assert plan_for("fsdp", options, small).fingerprints() == (
        plan_for("fsdp", options, large).fingerprints()
    )


def test_the_expected_abi_follows_the_torch_the_stages_pin(tmp_path: Path) -> None:
    from verl_bootstrap.kernels.planning import expected_key  # noqa: PLC0415

    _, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=64.0)
    assert facts.kernels is not None
    profile = load_profile("fsdp")
    old = expected_key(["torch==2.6.0"], profile, "cu128", facts.kernels)
    assert (old.torch, old.cuda, old.cxx11abi) == ("2.6.0", "12.8", False)
    new = expected_key(["vllm==0.24.0", "torch==2.11.0"], profile, "cu130", facts.kernels)
    assert (new.torch, new.cuda, new.cxx11abi) == ("2.11.0", "13.0", True)
    unknown = expected_key(["vllm"], profile, "cu130", facts.kernels)
    assert unknown.torch is None and unknown.cxx11abi is None


def test_a_host_without_ninja_is_told_the_build_will_be_slow(tmp_path: Path) -> None:
    options, facts = host("fsdp", tmp_path, driver(H100), cores=16, ram=64.0)
    assert facts.kernels is not None
    # a site that takes no prebuilt wheel: the plan is a source build
    facts = replace(facts, kernels=replace(facts.kernels, ninja=False, order=("wheelhouse",)))
    step = plan_for("fsdp", options, facts).step("flash-attn")
    assert "ninja is not on PATH, so the build runs one file at a time" in step.description
