"""A run reads the env's state once: its options, the change check and the run itself (record,
steps, outcome) share the one State; it is read again only when another process wrote it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verl_bootstrap.cli import build_parser
from verl_bootstrap.cli.optionsbuilder import options_and_state
from verl_bootstrap.paths import state_file
from verl_bootstrap.plan.stepcontract import NoOutputs
from verl_bootstrap.run.installrun import prepare_plan, run_install
from verl_bootstrap.run.state.changes import changes_for
from verl_bootstrap.run.state.state import State
from verl_bootstrap.run.steps import kinds


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every State.load, counted; the steps do nothing (this is about the state, not them)."""
    real = State.load.__func__  # type: ignore[attr-defined]
    seen: list[Path] = []

    def load(cls: type[State], path: Path) -> State:
        seen.append(path)
        return real(cls, path)  # type: ignore[no-any-return]

    monkeypatch.setattr(State, "load", classmethod(load))
    for kind in list(kinds.STEP_KINDS):
        monkeypatch.setitem(kinds.STEP_KINDS, kind, _done)
    return seen


def _done(ctx: Any) -> NoOutputs:
    return NoOutputs()


def _run(argv: list[str]) -> State:
    options, state = options_and_state(build_parser().parse_args(argv))
    plan = prepare_plan(options, detect=False, check_optional=False)
    changes_for(plan, state)
    result = run_install(plan, state=state, preflight=False)
    assert result.report.ok
    assert state is not None
    return state


def test_a_run_and_its_resume_each_read_the_state_once(tmp_path: Path, reads: list[Path]) -> None:
    prefix = tmp_path / "env"
    first = _run(["install", "--profile", "cpu", "--prefix", str(prefix), "--with-tests"])
    assert reads == [state_file(prefix)]
    assert first.record["options"]["with_tests"] is True  # the one State took the record ...
    assert first.steps["verify"].status == "done"  # ... the steps ...
    assert first.last_run["status"] == "ok"  # ... and the outcome
    reads.clear()

    again = _run(["install", "--prefix", str(prefix)])  # resumed from the record
    assert reads == [state_file(prefix)]
    assert again.record["options"]["with_tests"] is True
    assert State.load(state_file(prefix)).last_run == again.last_run  # what it holds was saved


def test_a_state_another_process_wrote_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    State(path=path).save()
    mine = State.load(path)
    assert mine.fresh() is mine  # unchanged on disk: the same State
    theirs = State.load(path)
    theirs.made = ["bin"]
    theirs.save()
    assert mine.fresh().made == ["bin"]
