"""The shipped profiles as data: the sglang profile, one engine per env, verify lists per ref.

Plans are compiled as the CLI does, for a GPU host (`--cuda`) from this host without a GPU.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version
from verlrepo import verl_pyproject_dir

from verl_bootstrap.errors import InputError
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile import list_profiles, load_profile
from verl_bootstrap.profile.stacks import apply_stack, supported_refs
from verl_bootstrap.profile.stagespec import stage_specs
from verl_bootstrap.profile.verlextras import marker_env, stage_pins
from verl_bootstrap.run.installrun import prepare_plan

FA4_DROPPED = "flash-attn-4 ; platform_machine == 'flash-attn-4-excluded'"
SGLANG_BASE = """\
schema_version: 1
name: {name}
verl: {{ref: {ref}}}
cuda_variants: {{cu130: {{cuda: "13.0", min_driver: "580"}}}}
stages:
  - id: engine
    packages: ["vllm==0.11.0", "torch==2.8.0"]
  - id: second-engine
    packages: ["sglang==0.5.2"]
"""


def plan_for(name: str, variant: str, prefix: Path, ref: str | None = None):  # type: ignore[no-untyped-def]
    """The plan the CLI compiles for `--profile name --cuda variant` on a host without a GPU."""
    # --resolve: these check what the profile resolves (its committed lockfile has own tests)
    options = RunOptions(profile=name, prefix=prefix, cuda=variant, verl_ref=ref, resolve=True)
    return prepare_plan(options, detect=False, check_optional=False)


def test_the_sglang_profile_is_shipped_with_cu13_and_cu12_variants() -> None:
    assert "sglang" in list_profiles()
    profile = load_profile("sglang")
    assert profile.gpu
    assert profile.cuda_variants["cu130"].cuda == "13.0"
    assert profile.cuda_variants["cu130"].min_driver == "580"
    assert profile.cuda_variants["cu128"].cuda == "12.8"
    assert profile.cuda_variants["cu128"].min_driver == "525"
    assert [s.id for s in profile.stages] == ["engine", "verl-deps", "flash-attn"]
    deps = next(s for s in profile.stages if s.kind == "verl-deps")
    assert deps.extras == ("fsdp", "sglang")  # verl's own extras, liger-kernel included


@pytest.mark.parametrize(
    ("variant", "sglang", "torch"),
    [("cu130", "0.5.12", "2.11.0"), ("cu128", "0.5.10.post1", "2.9.1")],
)
def test_sglang_plans_pin_the_engine_and_carry_verls_transformers_override(
    variant: str, sglang: str, torch: str, tmp_path: Path
) -> None:
    plan = plan_for("sglang", variant, tmp_path / "env")
    assert plan.variant == variant
    (engine,) = plan.step("engine").commands
    assert "--override" in engine
    pinned = at_verl_pins(plan, "engine")
    assert f"sglang=={sglang}" in pinned
    assert f"torch=={torch}" in pinned
    for stage in plan.stages:  # every resolving stage keeps verl's transformers, never fa4
        if stage.id != "flash-attn":
            assert "transformers==5.9.0" in stage.overrides, stage.id
            assert FA4_DROPPED in stage.overrides, stage.id
    assert not any(p.startswith("vllm") for s in plan.stages for p in s.packages)
    imports = plan.profile.verify.imports
    wanted = (
        "sglang",
        "sgl_kernel",
        "torch_memory_saver",
        "verl.workers.rollout.sglang_rollout",
        "verl.workers.engine.fsdp",
        "flash_attn",
    )
    assert set(wanted) <= set(imports)
    assert "vllm" not in imports
    assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("name", ["vllm-only", "fsdp", "megatron"])
def test_vllm_profiles_pin_verls_transformers_with_the_engine(name: str, tmp_path: Path) -> None:
    for variant, vllm, torch in (("cu130", "0.24.0", "2.11.0"), ("cu128", "0.19.1", "2.10.0")):
        pinned = at_verl_pins(plan_for(name, variant, tmp_path / variant), "engine")
        assert {f"vllm=={vllm}", f"torch=={torch}", "transformers==5.9.0"} <= set(pinned)


def test_megatron_uses_index_pairs_of_megatron_core_and_transformer_engine(tmp_path: Path) -> None:
    # verl 0.9.1's pairing: megatron-core 0.18.0 (the index's wheel of core_v0.18.0) with TE
    # 2.16.1 (x86_64; aarch64 takes 2.12.0, whose cu13 core links against torch 2.11's cuBLAS
    # 13.1.0.3, which the index's 2.13-2.16 cores do not: see profiles/megatron.yaml); cu128
    # takes the same core and TE 2.16.1's CUDA 12 core library
    for variant, core, te in (
        (
            "cu130",
            "0.18.0",
            [
                "transformer-engine[core-cu13,pytorch]==2.16.1 ; platform_machine == 'x86_64'",
                "transformer-engine[core-cu13,pytorch]==2.12.0 ; platform_machine == 'aarch64'",
            ],
        ),
        ("cu128", "0.18.0", ["transformer-engine[core-cu12,pytorch]==2.16.1"]),
    ):
        plan = plan_for("megatron", variant, tmp_path / variant)
        (trainer,) = plan.step("trainer").commands
        assert f"megatron-core=={core}" in trainer
        (engine,) = plan.step("transformer-engine").commands
        assert list(engine[-len(te) :]) == te
        assert "--no-build-isolation" in engine


def at_verl_pins(plan, stage_id: str) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    """A stage's packages at verl 0.9.1's pins, read from its real pyproject.toml."""
    spec = next(s for s in plan.stages if s.id == stage_id)
    return stage_pins(spec, verl_pyproject_dir("0.9.1"), marker_env("3.12", "linux-64")).packages


def _profile_file(tmp_path: Path, name: str, ref: str, extra: str = "") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SGLANG_BASE.format(name=name, ref=ref) + extra)
    return str(path)


@pytest.mark.parametrize("ref", ["v0.9.1", "main", "v0.10.0"])
def test_vllm_beside_sglang_is_refused_for_verl_0_9_1_and_later(ref: str, tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        load_profile(_profile_file(tmp_path, "both", ref))
    message = raised.value.message
    assert "vLLM and SGLang are both installed" in message
    assert "cannot share one env" in message
    assert "use two profiles" in message
    assert "stages.1" in message  # the stage that adds the second engine


def test_vllm_beside_sglang_is_allowed_for_releases_before_0_9_1(tmp_path: Path) -> None:
    # verl's install script at v0.6.1 - v0.9.0 put both engines into one env
    profile = load_profile(_profile_file(tmp_path, "both-old", "v0.8.0"))
    assert profile.verl.ref == "v0.8.0"


def test_a_stack_that_mixes_the_engines_for_a_new_ref_is_refused(tmp_path: Path) -> None:
    single = SGLANG_BASE.replace(
        '  - id: second-engine\n    packages: ["sglang==0.5.2"]\n', ""
    ).format(name="one", ref="v0.9.1")
    mixed = """\
stacks:
  - refs: [v0.7.1, v0.9.2]
    stages:
      - id: engine
        packages: ["vllm==0.11.0", "sglang==0.5.2"]
"""
    path = tmp_path / "one.yaml"
    path.write_text(single + mixed)
    with pytest.raises(InputError, match=r"both installed for verl v0\.7\.1, v0\.9\.2"):
        load_profile(str(path))
    path.write_text(single + mixed.replace("v0.9.2", "v0.6.1"))
    assert supported_refs(load_profile(str(path))) == ["v0.9.1", "v0.7.1", "v0.6.1"]


def _release(ref: str) -> Version:
    found = re.match(r"^v(\d+\.\d+\.\d+)$", ref)
    assert found, ref
    return Version(found.group(1))


@pytest.mark.parametrize("name", list_profiles())
def test_verify_lists_follow_the_worker_modules_of_each_ref(name: str) -> None:
    # facts §6b/§6c: fsdp_workers up to v0.7.1, engine_workers from v0.7.0
    base = load_profile(name)
    for ref in supported_refs(base):
        profile = apply_stack(base, ref)
        imports = profile.verify.imports
        release = _release(ref)
        for module in (
            "verl",
            "verl.trainer.main_ppo",
            "verl.trainer.ppo.ray_trainer",
            "torch",
            "ray",
            "tensordict",
            "transformers",
        ):
            assert module in imports, (name, ref, module)
        assert ("verl.workers.fsdp_workers" in imports) == (release <= Version("0.7.1")), ref
        assert ("verl.workers.engine_workers" in imports) == (release >= Version("0.7.0")), ref
        if "megatron.core" in imports:
            assert ("verl.workers.megatron_workers" in imports) == (release <= Version("0.7.1"))
            assert ("verl.workers.engine.megatron" in imports) == (release >= Version("0.7.0"))
            for module in ("transformer_engine.pytorch", "verl.utils.megatron_utils", "mbridge"):
                assert module in imports
        if "flash_attn" in imports and "megatron.core" not in imports:
            assert ("verl.workers.engine.fsdp" in imports) == (release >= Version("0.7.0"))
            assert "liger_kernel" in imports


@pytest.mark.parametrize("name", [n for n in list_profiles() if load_profile(n).gpu])
def test_every_gpu_profile_verifies_its_engine_and_smokes_the_gpu(name: str) -> None:
    verify = load_profile(name).verify
    engine = "sglang" if "sglang" in verify.imports else "vllm"
    assert engine in verify.imports
    assert f"verl.workers.rollout.{engine}_rollout" in verify.imports
    assert verify.gpu_smoke


@pytest.mark.parametrize("name", ["fsdp-script", "megatron-script"])
def test_the_script_route_runs_verls_script_under_bash_e_and_checks_what_it_promises(
    name: str, tmp_path: Path
) -> None:
    plan = plan_for(name, "cu128", tmp_path / "env")
    assert plan.source.ref == "v0.8.0"
    assert not plan.source.sdist_fallback  # the script is not in verl's sdist
    (script,) = plan.stages[:1]
    assert script.kind == "script"
    assert script.script == "scripts/install_vllm_sglang_mcore.sh"
    assert script.env["USE_SGLANG"] == "0"  # sglang 0.5.2 and vllm 0.11.0 pin different xgrammar
    assert script.env["USE_MEGATRON"] == ("1" if name == "megatron-script" else "0")
    assert {"vllm", "torch", "flash-attn"} <= set(script.expect)
    (command,) = plan.step("install-script").commands
    assert command[:4] == ("bash", "-eE", "-o", "pipefail")
    assert command[-1] == str(plan.source.checkout / "scripts/install_vllm_sglang_mcore.sh")
    assert script.env["PIP_UPLOADED_PRIOR_TO"] == "2026-06-02T00:00:00Z"
    assert [s.id for s in stage_specs(plan.profile, "cu128")] == ["install-script", "verl-deps"]


def test_the_megatron_script_route_is_not_offered_for_v0_9_0() -> None:
    with pytest.raises(InputError, match=r"no stack for verl ref 'v0\.9\.0'"):
        apply_stack(load_profile("megatron-script"), "v0.9.0")
    v090 = apply_stack(load_profile("fsdp-script"), "v0.9.0")
    assert list(v090.cuda_variants) == ["cu130"]
    assert v090.stages[0].expect["vllm"] == "==0.24.0"


def test_verify_may_only_tolerate_mismatches_a_stage_overrides(tmp_path: Path) -> None:
    body = SGLANG_BASE.replace(
        '  - id: second-engine\n    packages: ["sglang==0.5.2"]\n', ""
    ).format(name="tolerant", ref="v0.9.1")
    path = tmp_path / "tolerant.yaml"
    path.write_text(body + "verify: {overridden: [transformers]}\n")
    with pytest.raises(InputError, match="no stage overrides"):
        load_profile(str(path))
    path.write_text(
        body.replace('"torch==2.8.0"]', '"torch==2.8.0"]\n    overrides: ["transformers==5.9.0"]')
        + "verify: {overridden: [transformers]}\n"
    )
    assert load_profile(str(path)).verify.overridden == ("transformers",)


def test_uv_pip_check_mismatches_from_the_profiles_overrides_warn(tmp_path: Path) -> None:
    # a real env whose only unmet requirements are ones the spec declares as overridden
    from verl_bootstrap.installer.cmdline import uv_binary  # noqa: PLC0415
    from verl_bootstrap.profile.models import VerifySpec  # noqa: PLC0415
    from verl_bootstrap.verify.env import verify_env  # noqa: PLC0415

    env = tmp_path / "env"
    subprocess.run([uv_binary(), "venv", "-q", str(env)], check=True)
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(env / "bin" / "python"),
            "--no-deps",
            "requests",
        ],
        check=True,
    )
    unmet = ("charset-normalizer", "idna", "urllib3", "certifi")
    tolerant = VerifySpec(imports=(), gpu_smoke=False, overridden=unmet)
    (check,) = [c for c in verify_env(env, tolerant).checks if c.name == "uv pip check"]
    assert check.status == "warn"
    assert "only the profile's overrides of certifi, charset-normalizer, idna, urllib3" in (
        check.detail
    )
    strict = VerifySpec(imports=(), gpu_smoke=False, overridden=unmet[:2])
    (check,) = [c for c in verify_env(env, strict).checks if c.name == "uv pip check"]
    assert check.status == "fail"
