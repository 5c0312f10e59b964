"""Each install option is declared once, on its RunOptions field: a new field reaches the flag,
the options builder, the env's record, the resume from it and the change check, with no other
edit."""

from __future__ import annotations

from dataclasses import fields, make_dataclass
from pathlib import Path

import pytest

from verl_bootstrap.cli import build_parser
from verl_bootstrap.cli.optionsbuilder import run_options
from verl_bootstrap.errors import InputError
from verl_bootstrap.options import RunOptions, declared, option
from verl_bootstrap.paths import state_file
from verl_bootstrap.plan.graph import Plan
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.state.changes import Change, changes_for
from verl_bootstrap.run.state.envrecord import plan_options, record_of
from verl_bootstrap.run.state.state import State

# a RunOptions with one more option, declared the way every real one is
DummyOptions = make_dataclass(
    "DummyOptions",
    [
        ("dummy_knob", bool, option(False, "--dummy-knob", kind="switch", help="a test's knob")),
        ("dummy_mirror", "str | None", option(None, "--dummy-mirror", masked=True, help="a URL")),
    ],
    bases=(RunOptions,),
    frozen=True,
)


@pytest.fixture
def dummy_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI builds its parser and its options from DummyOptions."""
    monkeypatch.setattr("verl_bootstrap.cli.flags.RunOptions", DummyOptions)
    monkeypatch.setattr("verl_bootstrap.cli.optionsbuilder.RunOptions", DummyOptions)
    monkeypatch.setattr("verl_bootstrap.options.RunOptions", DummyOptions)


def _options(argv: list[str]) -> RunOptions:
    return run_options(build_parser().parse_args(argv))


@pytest.mark.usefixtures("dummy_options")
def test_a_declared_field_reaches_flag_record_resume_and_change_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "env"
    mirror = "https://user:s3cret@mirror.example/verl"
    base = ["install", "--profile", "cpu", "--prefix", str(prefix), "--dummy-mirror", mirror]

    # the flag: parsed into the new field (and left out, the field's default)
    plain = _options(base)
    assert isinstance(plain, DummyOptions)
    assert (vars(plain)["dummy_knob"], vars(plain)["dummy_mirror"]) == (False, mirror)
    knob_on = _options([*base, "--dummy-knob"])
    assert vars(knob_on)["dummy_knob"] is True
    with pytest.raises(SystemExit):
        build_parser().parse_args(["install", "--help"])
    assert "--dummy-knob" in capsys.readouterr().out

    # the record: kept, with the credentials of a masked option masked
    plan = _plan(plain)
    kept = plan_options(plan)
    assert kept["dummy_knob"] is False
    assert kept["dummy_mirror"] == "https://***@mirror.example/verl"
    State(path=state_file(prefix), record=record_of(plan)).save()

    # the change check: the new option's change is shown like any other
    changed = changes_for(_plan(knob_on))
    assert changed is not None
    assert Change("dummy knob", "off", "on") in changed.changes

    # the resume: `--prefix P` alone takes the option from the record; a masked one is asked for
    State(path=state_file(prefix), record=record_of(_plan(knob_on))).save()
    with pytest.raises(InputError, match=r"--dummy-mirror .* held credentials"):
        _options(["install", "--prefix", str(prefix)])
    resumed = _options(["install", "--prefix", str(prefix), "--dummy-mirror", mirror])
    assert vars(resumed)["dummy_knob"] is True


def _plan(options: RunOptions) -> Plan:
    return prepare_plan(options, detect=False, check_optional=False)


def test_every_run_option_but_the_site_config_is_declared() -> None:
    """A RunOptions field without a declaration would silently miss its flag and record."""
    names = {o.name for o in declared()}
    assert {f.name for f in fields(RunOptions)} - names == {"site"}
    flags = [f for o in declared() for f in o.spec.flags]
    assert len(flags) == len(set(flags)), "two options share a flag"
