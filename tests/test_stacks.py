"""Per-release stacks: each verl ref of a shipped profile gets the stack its release was made for.

The pins asserted here are the facts (verl-install-facts §2b, §3b, §9a) and the resolution checks
behind the profiles (the heavy tier re-resolves every stack against the index).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from verlrepo import verl_pyproject_dir

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK, InputError
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import EXCLUDE_NEWER_ENV, apply_stack, stack_for, supported_refs
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.profile.verlextras import marker_env, stage_pins
from verl_bootstrap.run.installrun import prepare_plan

OLDER = ("v0.6.1", "v0.7.0", "v0.7.1", "v0.8.0", "v0.9.0")
DECLARATIVE = ("cpu", "vllm-only", "fsdp", "megatron", "sglang")
RELEASE_DAY_AFTER = {
    "v0.6.1": "2025-11-15",
    "v0.7.0": "2026-01-06",
    "v0.7.1": "2026-03-17",
    "v0.8.0": "2026-06-02",
    "v0.9.0": "2026-08-15",
}


def packages(profile: Profile, variant: str, stage_id: str) -> tuple[str, ...]:
    """The packages one stage installs for one CUDA variant (a stage that takes verl's pins
    reads them from verl 0.9.1's real pyproject.toml)."""
    spec = next(s for s in stage_specs(profile, variant) if s.id == stage_id)
    return stage_pins(spec, verl_pyproject_dir("0.9.1"), marker_env("3.12", "linux-64")).packages


def everything(profile: Profile, variant: str) -> set[str]:
    """Every requirement any stage installs for `variant`."""
    return {p for s in stage_specs(profile, variant) for p in s.packages}


@pytest.mark.parametrize("name", DECLARATIVE)
def test_every_declarative_profile_covers_v0_6_1_to_v0_9_1(name: str) -> None:
    assert supported_refs(load_profile(name)) == [
        "v0.9.1",
        "v0.9.0",
        "v0.8.0",
        "v0.7.1",
        "v0.7.0",
        "v0.6.1",
    ]


@pytest.mark.parametrize("name", ["vllm-only", "fsdp", "megatron"])
@pytest.mark.parametrize("ref", ["v0.6.1", "v0.7.0", "v0.7.1", "v0.8.0"])
def test_vllm_profiles_before_0_9_get_the_docs_stack(name: str, ref: str) -> None:
    # facts §1b/§2b: Python 3.12, vLLM 0.11.0 with torch 2.8.0 (CUDA 12.8), flashinfer 0.3.1
    profile = apply_stack(load_profile(name), ref)
    assert profile.verl.ref == ref
    assert profile.python.requires == ">=3.12,<3.13"
    assert list(profile.cuda_variants) == ["cu128"]
    engine = packages(profile, "cu128", "engine")
    assert {"vllm==0.11.0", "torch==2.8.0", "flashinfer-python==0.3.1", "numpy<2.0.0"} <= set(
        engine
    )
    assert "transformers==4.57.1" in engine  # 5.x postdates these releases
    assert profile.verify.versions["torch"] == "==2.8.0"


@pytest.mark.parametrize("ref", ["v0.6.1", "v0.7.1", "v0.8.0"])
def test_fsdp_and_megatron_before_0_9_get_flash_attn_2_8_1_te_2_6_and_core_0_13_1(
    ref: str,
) -> None:
    fsdp = apply_stack(load_profile("fsdp"), ref)
    assert packages(fsdp, "cu128", "flash-attn") == ("flash-attn==2.8.1",)
    megatron = apply_stack(load_profile("megatron"), ref)
    assert packages(megatron, "cu128", "transformer-engine") == (
        "transformer-engine[pytorch]==2.6.0",
    )
    trainer = set(packages(megatron, "cu128", "trainer"))
    assert {"megatron-core==0.13.1", "nvidia-cudnn-cu12==9.10.2.21", "onnxscript==0.3.1"} <= trainer


@pytest.mark.parametrize(
    ("ref", "sglang", "torch"),
    [
        ("v0.6.1", "0.5.5", "2.8.0"),  # setup.py sglang extra at v0.6.1
        ("v0.7.0", "0.5.6", "2.9.1"),
        ("v0.7.1", "0.5.6", "2.9.1"),
        ("v0.8.0", "0.5.8", "2.9.1"),
    ],
)
def test_sglang_before_0_9_gets_the_sglang_of_verls_own_extra(
    ref: str, sglang: str, torch: str
) -> None:
    profile = apply_stack(load_profile("sglang"), ref)
    assert list(profile.cuda_variants) == ["cu128"]
    engine = set(packages(profile, "cu128", "engine"))
    assert {f"sglang[srt,openai]=={sglang}", f"torch=={torch}", "numpy<2.0.0"} <= engine
    assert not any(p.startswith("vllm") for p in everything(profile, "cu128"))


@pytest.mark.parametrize("ref", ["v0.9.0", "v0.9.1"])
def test_0_9_gets_todays_cu13_and_cu12_stacks(ref: str) -> None:
    vllm = apply_stack(load_profile("fsdp"), ref)
    assert set(vllm.cuda_variants) == {"cu130", "cu128"}
    assert {"vllm==0.24.0", "torch==2.11.0", "transformers==5.9.0"} <= set(
        packages(vllm, "cu130", "engine")
    )
    # vLLM 0.18.x/0.19.0 cap transformers < 5, verl 0.9.1 needs >= 5.5.3 (facts §12)
    assert {"vllm==0.19.1", "torch==2.10.0", "transformers==5.9.0"} <= set(
        packages(vllm, "cu128", "engine")
    )
    assert packages(vllm, "cu130", "flash-attn") == ("flash-attn==2.8.3",)
    sglang = apply_stack(load_profile("sglang"), ref)
    assert {"sglang==0.5.12", "torch==2.11.0"} <= set(packages(sglang, "cu130", "engine"))
    assert {"sglang==0.5.10.post1", "torch==2.9.1"} <= set(packages(sglang, "cu128", "engine"))


@pytest.mark.parametrize("name", DECLARATIVE)
@pytest.mark.parametrize("ref", OLDER)
def test_an_older_stack_resolves_as_of_the_day_after_its_release(name: str, ref: str) -> None:
    profile = apply_stack(load_profile(name), ref)
    day = f"{RELEASE_DAY_AFTER[ref]}T00:00:00Z"
    for stage in profile.stages:
        if stage.index:  # PyTorch's index reports no upload times: its stage pins exactly
            assert not set(EXCLUDE_NEWER_ENV) & set(stage.env)
            assert all("==" in p for p in stage.packages)
        else:
            assert {stage.env[v] for v in EXCLUDE_NEWER_ENV} == {day}, stage.id


@pytest.mark.parametrize("name", DECLARATIVE)
def test_the_profiles_own_ref_has_no_cutoff(name: str) -> None:
    profile = apply_stack(load_profile(name), None)
    assert all(not set(EXCLUDE_NEWER_ENV) & set(s.env) for s in profile.stages)


def test_a_ref_no_stack_covers_is_refused_with_the_supported_refs() -> None:
    with pytest.raises(InputError) as raised:
        apply_stack(load_profile("fsdp"), "v0.5.0")
    data = raised.value.data
    assert (data["profile"], data["ref"], data["suggestion"]) == ("fsdp", "v0.5.0", None)
    assert data["supported"][:6] == ["v0.9.1", "v0.9.0", "v0.8.0", "v0.7.1", "v0.7.0", "v0.6.1"]
    assert "--allow-unsupported-ref" in (raised.value.hint or "")  # the way past it
    today = apply_stack(load_profile("fsdp"), "main", allow_unsupported=True)
    assert today.verl.ref == "main"
    assert today.stages == load_profile("fsdp").stages


def test_a_plan_at_an_older_ref_uses_its_stack_and_refuses_a_variant_it_lacks(
    tmp_path: Path,
) -> None:
    options = RunOptions(
        profile="vllm-only", prefix=tmp_path / "env", cuda="cu128", verl_ref="v0.8.0"
    )
    plan = prepare_plan(options, detect=False, check_optional=False)
    assert plan.source.ref == "v0.8.0"
    (command,) = plan.step("engine").commands
    assert "vllm==0.11.0" in command
    assert "torch==2.8.0" in command
    assert plan.step("engine").inputs.env["UV_EXCLUDE_NEWER"] == "2026-06-02T00:00:00Z"
    assert "verl.workers.engine_workers" in plan.profile.verify.imports
    newer = RunOptions(
        profile="vllm-only", prefix=tmp_path / "env", cuda="cu130", verl_ref="v0.8.0"
    )
    with pytest.raises(InputError) as lacking:
        prepare_plan(newer, detect=False, check_optional=False)
    assert lacking.value.data["variant"] == "cu130"  # the variant this ref's stack lacks
    assert not (tmp_path / "env").exists()


def test_profiles_show_prints_what_a_ref_gets(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profiles", "show", "megatron", "--verl-ref", "v0.7.1"]) == EXIT_OK
    shown = capsys.readouterr().out
    assert "ref: v0.7.1" in shown
    assert "megatron-core==0.13.1" in shown
    assert "transformer-engine[pytorch]==2.6.0" in shown
    assert "verl.workers.megatron_workers" in shown
    assert "UV_EXCLUDE_NEWER: '2026-03-17T00:00:00Z'" in shown
    argv = ["profiles", "show", "megatron", "--verl-ref", "v0.4.1", "--json"]
    assert cli.main(argv) == EXIT_BAD_INPUT
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["kind"], error["data"]["ref"]) == ("InputError", "v0.4.1")
    assert error["data"]["supported"][:2] == ["v0.9.1", "v0.9.0"]


def test_every_older_ref_has_its_own_stack_with_a_note() -> None:
    for name in DECLARATIVE:
        profile = load_profile(name)
        for ref in OLDER:
            stack = stack_for(profile, ref)
            assert stack is not None, (name, ref)
            assert stack.refs == (ref,)  # one stack per release: its own cutoff and modules
            assert stack.note
