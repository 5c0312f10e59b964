"""--with-tests has an off switch (--no-with-tests) that beats the env's record, and a lockfile
install (--locked) of an env made --with-tests is no longer refused: the record's choice gives
way, said in a note, and the plan installs the lockfile."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_bootstrap.cli import build_parser
from verl_bootstrap.cli.optionsbuilder import run_options
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import state_file
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.state.envrecord import record_of
from verl_bootstrap.run.state.state import State


def _options(argv: list[str]) -> RunOptions:
    return run_options(build_parser().parse_args(["install", *argv]))


@pytest.fixture
def made_with_tests(tmp_path: Path) -> Path:
    """An env's record that says it was made with --with-tests (the cpu profile)."""
    prefix = tmp_path / "env"
    options = _options(["--profile", "cpu", "--prefix", str(prefix), "--with-tests"])
    assert options.with_tests is True
    plan = prepare_plan(options, detect=False, check_optional=False)
    assert "tests" in {stage.id for stage in plan.stages}
    State(path=state_file(prefix), record=record_of(plan)).save()
    return prefix


def test_the_record_keeps_it_and_the_off_switch_turns_it_off(made_with_tests: Path) -> None:
    assert _options(["--prefix", str(made_with_tests)]).with_tests is True  # resumed
    assert _options(["--prefix", str(made_with_tests), "--no-with-tests"]).with_tests is False
    assert _options(["--prefix", str(made_with_tests), "--with-tests"]).with_tests is True


def test_a_locked_run_of_such_an_env_installs_the_lockfile(
    made_with_tests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = _options(["--prefix", str(made_with_tests), "--locked", "--python", "3.12"])
    assert options.with_tests is False
    assert "this env was made --with-tests; a lockfile install holds no test stages" in (
        capsys.readouterr().err
    )
    plan = prepare_plan(options, detect=False, check_optional=False)
    assert plan.locked is not None  # the lockfile's install, not a refusal
    assert "tests" not in {stage.id for stage in plan.stages}
