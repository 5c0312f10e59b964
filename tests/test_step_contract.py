"""The step contract: each step kind's inputs and outputs a frozen dataclass; the fingerprint made
from the inputs' fields, a field left None not part of it (so an env recorded before a field
existed keeps its fingerprints); outputs read back from the state file's JSON whatever its age.
The plans are the tool's own, for the cpu profile, on a GPU-less host."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.plan.stepcontract import (
    CreateEnvInputs,
    FetchSourceInputs,
    NoInputs,
    RecordLockInputs,
    SourceOutputs,
    StageInputs,
    StageOutputs,
    VerifyInputs,
)
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.source.spec import SourceResult

KINDS = {
    "create-env": CreateEnvInputs,
    "fetch-source": FetchSourceInputs,
    "install-verl": NoInputs,
    "stage": StageInputs,
    "script": StageInputs,
    "record-lock": RecordLockInputs,
    "verify": VerifyInputs,
}


def _plan(tmp_path: Path, profile: str = "cpu", **options: object) -> Plan:
    opts = RunOptions(profile=profile, prefix=tmp_path / "env", **options)  # type: ignore[arg-type]
    return prepare_plan(opts, driver=None, detect=False, check_optional=False, planning=True)


@pytest.mark.parametrize("resolve", [False, True])
def test_every_step_carries_its_kinds_own_frozen_inputs(tmp_path: Path, resolve: bool) -> None:
    plan = _plan(tmp_path, resolve=resolve)
    for step in plan.steps:
        assert type(step.inputs) is KINDS[step.kind], step.id
        first = dataclasses.fields(step.inputs)[:1]
        if first:  # frozen: a step's inputs cannot change after the plan is compiled
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(step.inputs, first[0].name, None)


def test_a_locked_stage_fingerprints_its_lockfile_part_and_a_resolving_one_does_not(
    tmp_path: Path,
) -> None:
    locked = _plan(tmp_path).step("verl-deps").inputs
    resolving = _plan(tmp_path, resolve=True).step("verl-deps").inputs
    assert isinstance(locked, StageInputs) and isinstance(resolving, StageInputs)
    assert locked.locked and "locked" in locked.fingerprint_body()
    assert resolving.locked is None and "locked" not in resolving.fingerprint_body()
    assert "build" not in resolving.fingerprint_body()  # None: left out, as older records are


def test_each_field_moves_the_fingerprint_and_the_dependents_after_it(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    before = plan.fingerprints()
    step = plan.step("create-env")
    assert isinstance(step.inputs, CreateEnvInputs)
    moved = dataclasses.replace(step, inputs=dataclasses.replace(step.inputs, python=">=3.13"))
    steps = tuple(moved if s.id == step.id else s for s in plan.steps)
    after = dataclasses.replace(plan, steps=steps).fingerprints()
    assert after["create-env"] != before["create-env"]
    assert after["install-verl"] != before["install-verl"]  # it depends on create-env
    assert after["fetch-source"] == before["fetch-source"]  # it does not


def test_the_body_is_plain_json_data() -> None:
    inputs = StageInputs(env={"A": "1"}, overrides=("x",), expect={}, protect=("torch",))
    assert inputs.fingerprint_body() == {
        "env": {"A": "1"},
        "overrides": ["x"],
        "expect": {},
        "protect": ["torch"],
    }
    assert VerifyInputs(verify={"imports": ["verl"]}).fingerprint_body() == {
        "verify": {"imports": ["verl"]}
    }


def test_outputs_read_back_from_a_record_of_any_age() -> None:
    # an env recorded before a stage kept "installed", with a key no kind writes any more
    old = StageOutputs.read({"built": {"flash-attn": "ab" * 32}, "gone": 1})
    assert old == StageOutputs(installed=None, built={"flash-attn": "ab" * 32}, kernel=None)
    assert StageOutputs.read(None) == StageOutputs()
    assert "installed" not in old.to_json()  # left None: not written back


def test_the_source_outputs_carry_the_fetch_result_through_the_state_file(tmp_path: Path) -> None:
    result = SourceResult(
        kind="sdist", repo="verl", ref="v0.9.1", path=tmp_path, sdist_sha256="cd" * 32
    )
    stored = json.loads(json.dumps(SourceOutputs.of(result).to_json()))
    assert SourceOutputs.read(stored).result() == result
