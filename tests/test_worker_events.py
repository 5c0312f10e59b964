"""Events from steps reach the terminal: steps run in worker threads, and what they emit (a note,
each line of their output) must reach the listener the CLI installed, in the order it happened.

The plan is the real cpu plan and the output comes from a real child process through the one
subprocess wrapper; only what the step runs is chosen here, so the test takes a second.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from verl_bootstrap import proc
from verl_bootstrap.cli.render import Console
from verl_bootstrap.events import Event, emit, listening
from verl_bootstrap.options import RunOptions
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.plan.stepcontract import NoOutputs
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.runner import run_plan
from verl_bootstrap.run.steps.stepcontext import StepContext


@pytest.fixture
def plan(tmp_path: Path) -> Plan:
    options = RunOptions(profile="cpu", prefix=tmp_path / "env")
    return prepare_plan(options, driver=None, detect=False, check_optional=False)


def talking_step(ctx: StepContext) -> NoOutputs:
    """A step that prints three lines through a real child, then leaves a note."""
    code = "import sys\nfor i in range(3): print(f'line {i}', flush=True)"
    proc.run([sys.executable, "-c", code], log_path=ctx.log_path, on_line=ctx.on_line)
    emit(f"{ctx.step.id} says hello", kind=("note",), step=ctx.step.id)
    return NoOutputs()


class TtyBuffer(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_worker_steps_lines_and_notes_reach_the_listener_in_order(plan: Plan) -> None:
    events: list[Event] = []
    with listening(events.append):
        report = run_plan(plan, executor=talking_step)
    assert report.ok
    for step in plan.steps:
        mine = [e for e in events if e.data.get("step") == step.id]
        kinds = [e.kind for e in mine]
        assert kinds[0] == ("step", "start") and kinds[-1] == ("step", "done"), kinds
        lines = [e.message for e in mine if e.kind == ("step", "line")]
        assert lines == ["line 0", "line 1", "line 2"]
        assert [e.message for e in mine if e.kind == ("note",)] == [f"{step.id} says hello"]
        assert kinds.index(("note",)) > max(i for i, k in enumerate(kinds) if k[1:] == ("line",))


def test_the_console_shows_the_live_tail_and_the_notes(
    plan: Plan, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")  # the text itself (colour: tests/test_cli_live.py)
    stream = TtyBuffer()
    with Console(stream) as console, listening(console):
        run_plan(plan, executor=talking_step)
    shown = stream.getvalue()
    assert "│ line 2" in shown  # the live tail of a step's output, on a terminal
    assert "note: fetch-source says hello\n" in shown


def test_json_mode_keeps_the_notes_for_the_report(plan: Plan) -> None:
    stream = TtyBuffer()
    console = Console(stream, quiet=True)
    with listening(console):
        run_plan(plan, executor=talking_step)
    assert stream.getvalue() == ""
    assert sorted(console.notes) == sorted(f"{s.id} says hello" for s in plan.steps)
