"""The plan: its order for every shipped profile and driver, its JSON, and its purity.

GPU drivers cannot run here: they come from recorded real `nvidia-smi` outputs in
tests/data/nvidia/ (see NOTICE.md there), parsed by the tool's own parsers, or as driver=None.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from nvidiatext import parse_smi_table
from packaging.version import Version

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED, InputError, Refused
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.machine.gpu.smiparse import parse_smi_xml
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.facts import gather_host
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.profile import list_profiles, load_profile
from verl_bootstrap.profile.models import Stage
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.run import installrun
from verl_bootstrap.run.compiler.compile import compile_plan
from verl_bootstrap.run.installrun import prepare_plan

NVIDIA = Path(__file__).parent / "data" / "nvidia"
BUILTIN_FIRST = ("create-env", "fetch-source", "install-verl")
BUILTIN_LAST = ("record-lock", "verify")


def recorded_driver(name: str) -> DriverInfo:
    """A DriverInfo parsed from a recorded real nvidia-smi output."""
    text = (NVIDIA / name).read_text(encoding="utf-8")
    driver = parse_smi_xml(text) if name.endswith(".xml") else parse_smi_table(text)
    assert driver is not None, name
    return driver


H100_590 = "590.48.01-H100-table.txt"  # serves CUDA 13.1
RTX3060_570 = "570.124.04-RTX3060-qx.xml"  # serves CUDA 12.8
A100_535 = "535.54.03-A100-SXM4-80GBx4-MIG-qx.xml"  # serves CUDA 12.2
GT1030_470 = "470.74-GT1030-qx.xml"  # serves CUDA 11.4: too old for every GPU profile

GPU_PROFILES = [name for name in list_profiles() if load_profile(name).gpu]


def newest_gpu_variant(name: str) -> str:
    """The profile's GPU variant with the newest CUDA."""
    variants = load_profile(name).cuda_variants
    gpu = [n for n in variants if n != "cpu"]
    return max(gpu, key=lambda n: tuple(int(p) for p in (variants[n].cuda or "0").split(".")))


def served_variant(name: str, driver_version: str) -> str | None:
    """The newest variant of the profile whose driver window admits `driver_version`."""
    variants = load_profile(name).cuda_variants
    have = Version(driver_version)
    fits = [
        n
        for n, v in variants.items()
        if n != "cpu"
        and (not v.min_driver or have >= Version(v.min_driver))
        and (not v.max_driver or have < Version(v.max_driver))
    ]
    if not fits:
        return None
    return max(fits, key=lambda n: tuple(int(p) for p in (variants[n].cuda or "0").split(".")))


def compile_for(
    profile: str,
    prefix: Path,
    *,
    driver: DriverInfo | None = None,
    cuda: str = "auto",
    **options: object,
) -> Plan:
    """Compile a plan exactly as the CLI does, with the driver given rather than detected.

    These tests are about the resolving route (`--resolve`): a shipped profile's committed
    lockfile would otherwise be installed (its route: tests/test_lock_route.py).
    """
    if not any(options.get(k) for k in ("locked", "frozen", "lockfile")):
        options.setdefault("resolve", True)
    opts = RunOptions(profile=profile, prefix=prefix, cuda=cuda, **options)  # type: ignore[arg-type]
    return prepare_plan(opts, driver=driver, detect=False, check_optional=False)


def assert_plan_order(plan: Plan) -> None:
    """create-env ∥ fetch-source → install-verl → the stages in profile order → lock → verify."""
    stage_ids = [s.id for s in plan.profile.stages if s.kind != "install-verl"]
    ids = [s.id for s in plan.steps]
    assert ids == [*BUILTIN_FIRST, *stage_ids, *BUILTIN_LAST]
    deps = {s.id: s.deps for s in plan.steps}
    assert deps["create-env"] == ()
    assert deps["fetch-source"] == ()
    assert deps["install-verl"] == ("create-env", "fetch-source")
    previous = "install-verl"
    for stage_id in stage_ids:
        assert deps[stage_id] == (previous,)
        previous = stage_id
    assert deps["record-lock"] == (previous,)
    assert deps["verify"] == ("record-lock",)
    for position, step in enumerate(plan.steps):  # a topological order
        assert all(ids.index(d) < position for d in step.deps)


def test_the_shipped_profiles_are_cpu_and_gpu_ones() -> None:
    names = list_profiles()
    assert "cpu" in names
    assert {"fsdp", "megatron", "vllm-only"} <= set(GPU_PROFILES)
    assert set(GPU_PROFILES) == set(names) - {"cpu"}


@pytest.mark.parametrize("name", list_profiles())
def test_every_shipped_profile_compiles_in_order_with_no_gpu_as_cpu_or_for_a_gpu_host(
    name: str, tmp_path: Path
) -> None:
    prefix = tmp_path / "env"
    if name in GPU_PROFILES:
        variant = newest_gpu_variant(name)
        plan = compile_for(name, prefix, driver=None, cuda=variant)
        assert plan.variant == variant
        assert "--cuda" in plan.variant_reason
    else:
        plan = compile_for(name, prefix)
        assert plan.variant == "cpu"
    assert_plan_order(plan)
    assert not prefix.exists()


@pytest.mark.parametrize("name", GPU_PROFILES)
@pytest.mark.parametrize(
    ("recording", "variant"),
    [(H100_590, "cu130"), (RTX3060_570, "cu128"), (A100_535, "cu128")],
)
def test_gpu_profiles_pick_the_variant_the_recorded_driver_serves(
    name: str, recording: str, variant: str, tmp_path: Path
) -> None:
    driver = recorded_driver(recording)
    expected = served_variant(name, driver.version)
    if variant in load_profile(name).cuda_variants:  # the windows agree with the recording's CUDA
        assert expected == variant
    if expected is None:  # e.g. a cu12x-only profile on a driver >= 580
        with pytest.raises(Refused):
            compile_for(name, tmp_path / "env", driver=driver)
        return
    plan = compile_for(name, tmp_path / "env", driver=driver)
    assert plan.variant == expected
    assert driver.version in plan.variant_reason
    variant = expected
    assert_plan_order(plan)
    # each stage installs the packages of that variant (its per-variant list when it has one)
    # (and a deps stage the substitutes for what verl's extras declare, see test_verl_extras)
    specs = {s.id: s for s in plan.stages}
    for stage in plan.profile.stages:
        if stage.kind == "script":  # verl's own script, run from the checkout
            assert plan.step(stage.id).commands[0][:2] == ("bash", "-eE")
            continue
        override = stage.variants.get(variant)
        wanted = override.packages if override and override.packages is not None else None
        (command,) = plan.step(stage.id).commands
        asked = specs[stage.id].packages
        assert command[len(command) - len(asked) :] == asked
        assert specs[stage.id].packages[: len(wanted or stage.packages)] == (
            wanted or stage.packages
        )


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_a_gpu_profile_with_no_driver_and_cuda_auto_is_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(Refused) as raised:
        compile_for(name, tmp_path / "env", driver=None)
    assert raised.value.data == {"profile": name, "driver": None}
    hint = raised.value.hint or ""
    assert "--profile cpu" in hint
    assert "--cuda" in hint
    assert not (tmp_path / "env").exists()


def test_install_refuses_a_gpu_profile_with_no_driver_with_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(installrun, "host_driver", lambda: None)  # no GPU here
    prefix = tmp_path / "env"
    assert cli.main(["--profile", "fsdp", "--prefix", str(prefix)]) == EXIT_REFUSED
    assert "hint: " in capsys.readouterr().err  # the hint's wording: the test above
    assert cli.main(["--profile", "fsdp", "--prefix", str(prefix), "--json"]) == EXIT_REFUSED
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["kind"], error["data"]) == ("Refused", {"profile": "fsdp", "driver": None})
    assert error["hint"]
    assert not prefix.exists()


@pytest.mark.parametrize("name", GPU_PROFILES)
def test_plan_on_a_host_with_no_driver_plans_the_default_variant_and_says_so(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login node: `plan --profile fsdp` (help's own example) plans the profile's default
    variant, the newest CUDA, and says that no driver chose it."""
    monkeypatch.setattr(installrun, "host_driver", lambda: None)  # no GPU here
    prefix = tmp_path / "env"
    assert cli.main(["plan", "--profile", name, "--prefix", str(prefix), "--json"]) == EXIT_OK
    body = json.loads(capsys.readouterr().out)
    default = newest_gpu_variant(name)
    assert body["variant"] == default
    assert body["variant_reason"].startswith(
        f"no NVIDIA driver on this host: planned for the default variant of {name!r}, {default}"
    )
    assert "an install here picks none without --cuda" in body["variant_reason"]
    assert cli.main(["plan", "--profile", name, "--prefix", str(prefix)]) == EXIT_OK
    assert f"CUDA variant: {default} (no NVIDIA driver on this host:" in capsys.readouterr().out
    assert not prefix.exists()


def test_the_cli_takes_the_driver_from_the_override_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_CUDA_DRIVER", recorded_driver(RTX3060_570).version)
    argv = ["plan", "--profile", "vllm-only", "--prefix", str(tmp_path / "env"), "--json"]
    assert cli.main(argv) == EXIT_OK
    body = json.loads(capsys.readouterr().out)
    assert body["variant"] == "cu128"
    assert "570.124.04" in body["variant_reason"]


def test_a_driver_too_old_for_every_variant_is_refused_with_the_ranges(tmp_path: Path) -> None:
    with pytest.raises(Refused) as raised:
        compile_for("fsdp", tmp_path / "env", driver=recorded_driver(GT1030_470))
    data = raised.value.data
    assert (data["profile"], data["driver"]) == ("fsdp", "470.74")
    needs = {w["name"]: w["min_driver"] for w in data["windows"]}
    assert (needs["cu128"], needs["cu130"]) == ("525", "580")


def test_an_unknown_variant_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        compile_for("cpu", tmp_path / "env", cuda="cu999")
    assert raised.value.data == {"profile": "cpu", "variant": "cu999", "variants": ["cpu"]}
    assert "auto" in (raised.value.hint or "")


def test_the_cpu_plan_runs_the_commands_it_shows(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    plan = compile_for("cpu", prefix)
    checkout = str(prefix / "src" / "verl")
    (create,) = plan.step("create-env").commands
    assert Path(create[0]).name == "uv"
    assert create[1:2] == ("venv",)
    assert create[-1] == str(prefix)
    assert "--seed" not in create  # uv installs everything; pip is not needed
    (clone,) = plan.step("fetch-source").commands
    assert clone[:6] == ("git", "clone", "--depth", "1", "--branch", "v0.9.1")
    assert clone[-1] == checkout
    assert "sdist from the index" in plan.step("fetch-source").description
    (verl,) = plan.step("install-verl").commands
    assert verl[1:4] == ("pip", "install", "--python")
    assert "--no-deps" in verl
    assert verl[-2:] == ("-e", checkout)
    (torch,) = plan.step("torch").commands
    assert torch[-1] == "torch==2.13.0"
    (deps,) = plan.step("verl-deps").commands
    # verl by name, pinned to its editable install in a constraints file: not built again
    assert deps[-1] == "verl[verl-core]"
    assert "-e" not in deps
    pins = str(prefix / ".verl-bootstrap" / "protected" / "verl-deps.txt")
    assert deps[deps.index(pins) - 1] == "--constraint"
    assert "--no-deps" not in deps


def test_the_pip_installer_seeds_pip_and_installs_with_it(tmp_path: Path) -> None:
    plan = compile_for("cpu", tmp_path / "env", installer="pip")
    assert "--seed" in plan.step("create-env").commands[0]
    python = str(tmp_path / "env" / "bin" / "python")
    for step_id in ("install-verl", "torch", "verl-deps"):
        assert plan.step(step_id).commands[0][:4] == (python, "-m", "pip", "install")


def test_plan_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = tmp_path / "env"
    argv = ["plan", "--profile", "cpu", "--prefix", str(prefix), "--json"]
    assert cli.main(argv) == EXIT_OK
    body = json.loads(capsys.readouterr().out)
    assert body["schema"] == "verl-bootstrap.plan/1"
    assert body["profile"] == "cpu"
    assert body["prefix"] == str(prefix)
    assert body["backend"] == "venv"
    assert body["variant"] == "cpu"
    assert body["verl"] == {"repo": "https://github.com/verl-project/verl.git", "ref": "v0.9.1"}
    steps = body["steps"]
    assert [s["id"] for s in steps] == [*BUILTIN_FIRST, "torch", "verl-deps", *BUILTIN_LAST]
    assert [s["kind"] for s in steps] == [
        "create-env",
        "fetch-source",
        "install-verl",
        "stage",
        "stage",
        "record-lock",
        "verify",
    ]
    assert [s["deps"] for s in steps] == [
        [],
        [],
        ["create-env", "fetch-source"],
        ["install-verl"],
        ["torch"],
        ["verl-deps"],
        ["record-lock"],
    ]
    for step in steps:
        assert isinstance(step["commands"], list)
        assert all(
            isinstance(c, list) and all(isinstance(a, str) for a in c) for c in step["commands"]
        )
        assert len(step["fingerprint"]) == 16
    assert not prefix.exists()


def test_plan_text_lists_each_step_with_its_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["plan", "--profile", "cpu", "--prefix", str(tmp_path / "env")]) == EXIT_OK
    text = capsys.readouterr().out
    assert "1. create-env [create-env]  (no dependencies)" in text
    assert "3. install-verl [install-verl]  (after create-env, fetch-source)" in text
    assert "get verl v0.9.1: its release sdist verl-0.9.1.tar.gz" in text  # the lock pins it
    assert "git clone" not in text  # so no git runs: the step shows no git command
    argv = ["plan", "--profile", "cpu", "--resolve", "--prefix", str(tmp_path / "env")]
    assert cli.main(argv) == EXIT_OK
    assert "$ git clone --depth 1 --branch v0.9.1" in capsys.readouterr().out


def test_a_script_stage_seeds_pip_runs_under_strict_bash_and_needs_the_repo(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "engines.yaml"
    profile.write_text(
        "schema_version: 1\n"
        "extends: cpu\n"
        "stages:\n"
        "  - id: engines\n"
        "    kind: script\n"
        "    script: scripts/install_vllm_sglang_mcore.sh\n"
    )
    prefix = tmp_path / "env"
    plan = compile_for(str(profile), prefix)
    assert "--seed" in plan.step("create-env").commands[0]
    script = str(prefix / "src" / "verl" / "scripts" / "install_vllm_sglang_mcore.sh")
    assert plan.step("engines").commands == (("bash", "-eE", "-o", "pipefail", script),)
    assert plan.step("engines").kind == "script"
    assert plan.source.sdist_fallback is False  # the sdist has no scripts/
    assert "sdist" not in plan.step("fetch-source").description


def test_stage_overrides_are_passed_from_a_file_in_the_state_folder(tmp_path: Path) -> None:
    profile = tmp_path / "overrides.yaml"
    profile.write_text(
        "schema_version: 1\n"
        "extends: cpu\n"
        "stages:\n"
        "  - id: torch\n"
        "    packages: ['torch==2.13.0']\n"
        "    overrides: ['transformers<5']\n"
    )
    prefix = tmp_path / "env"
    (command,) = compile_for(str(profile), prefix).step("torch").commands
    at = command.index("--override")
    assert command[at + 1] == str(prefix / ".verl-bootstrap" / "overrides" / "torch.txt")


# --- purity and fingerprints -------------------------------------------------------------------


def test_compiling_twice_gives_equal_plans_and_touches_nothing(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    first = compile_for("cpu", prefix)
    second = compile_for("cpu", prefix)
    assert first.fingerprints() == second.fingerprints()
    assert first.steps == second.steps
    assert len(set(first.fingerprints().values())) == len(first.steps)
    assert list(tmp_path.iterdir()) == []


def test_a_stage_change_changes_that_stage_and_every_later_fingerprint_only(
    tmp_path: Path,
) -> None:
    options = RunOptions(profile="cpu", prefix=tmp_path / "env")
    profile = apply_stack(load_profile("cpu"), None)  # as install resolves it: no option stages
    host = gather_host(
        profile, options, driver=None, variant=("cpu", "its only variant"), check_optional=False
    )
    before = compile_plan(profile, options, host).fingerprints()
    torch, deps = profile.stages
    changed = profile.model_copy(
        update={"stages": (torch.model_copy(update={"packages": ("torch==2.12.0",)}), deps)}
    )
    after = compile_plan(changed, options, host).fingerprints()
    unchanged = ["create-env", "fetch-source", "install-verl"]
    assert [after[i] for i in unchanged] == [before[i] for i in unchanged]
    for step_id in ("torch", "verl-deps", "record-lock", "verify"):
        assert after[step_id] != before[step_id], step_id


def test_a_change_to_the_last_stage_leaves_earlier_stages_alone(tmp_path: Path) -> None:
    options = RunOptions(profile="cpu", prefix=tmp_path / "env")
    profile = apply_stack(load_profile("cpu"), None)  # as install resolves it: no option stages
    host = gather_host(
        profile, options, driver=None, variant=("cpu", "its only variant"), check_optional=False
    )
    before = compile_plan(profile, options, host).fingerprints()
    torch, deps = profile.stages
    extra = Stage(id="extra", packages=("six==1.17.0",))
    grown = profile.model_copy(update={"stages": (torch, deps, extra)})
    after = compile_plan(grown, options, host).fingerprints()
    for step_id in (*BUILTIN_FIRST, "torch", "verl-deps"):
        assert after[step_id] == before[step_id], step_id
    assert after["record-lock"] != before["record-lock"]
    assert after["verify"] != before["verify"]


def test_the_variant_is_part_of_every_stage_fingerprint(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    cu130 = compile_for("vllm-only", prefix, cuda="cu130").fingerprints()
    cu128 = compile_for("vllm-only", prefix, cuda="cu128").fingerprints()
    assert cu130["create-env"] == cu128["create-env"]
    assert cu130["engine"] != cu128["engine"]
    assert cu130["record-lock"] != cu128["record-lock"]


def test_the_plan_keeps_the_driver_it_was_compiled_for(tmp_path: Path) -> None:
    driver = recorded_driver(H100_590)
    plan = compile_for("vllm-only", tmp_path / "env", driver=driver)
    assert plan.driver == driver
    assert replace(plan, steps=()).steps == ()  # frozen data: a changed copy, never a mutation
    assert plan.steps
