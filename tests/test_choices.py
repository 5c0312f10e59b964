"""Each choice a run rests on is made by one rule, in one place: the env backend
(`options.choose_backend`), the venv's Python for a lockfile or bundle (`has_python`), the CUDA
variant and the stack (`plan.choices`), a ref's stack for install, plan and `lock`
(`lock.making.refstack.asked_stack`), the host's driver (`machine.gpu.detect.host_driver`), a
lockfile's glibc (`platforms.locked_glibc`). Read from the source, so a second copy of a rule,
the kind that drifts from the first, fails here and names where it was written."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from verl_bootstrap.machine.gpu.detect import DRIVER_OVERRIDE, gpu_present, host_driver
from verl_bootstrap.machine.host.interpreters import (
    find_interpreter,
    has_python,
    interpreter_version,
    minor_fits,
)
from verl_bootstrap.options import DEFAULT_BACKEND, RunOptions, choose_backend
from verl_bootstrap.platforms import DEFAULT_GLIBC, locked_glibc
from verl_bootstrap.profile.models import EnvSpec

PACKAGE = Path(__file__).resolve().parents[1] / "verl_bootstrap"


@functools.cache  # each test reads the same tree: parsed once
def _sources() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "probes" in path.parts:  # run inside target envs, not the tool's own choices
            continue
        found[str(path.relative_to(PACKAGE))] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def _calls(name: str) -> list[str]:
    """Where the package calls `name` (a function or a method), as file:line."""
    at = []
    for file, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == name:
                    at.append(f"{file}:{node.lineno}")
    return at


def _backend_fallbacks() -> list[str]:
    """Every `X.backend or ...`: a backend worked out by hand beside the one rule."""
    at = []
    for file, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                first = node.values[0]
                if isinstance(first, ast.Attribute) and first.attr == "backend":
                    at.append(f"{file}:{node.lineno}")
    return at


def _minor_ranges() -> list[str]:
    """Every f-string that builds an X.Y range by hand (`>={major}.{minor},<...{minor + 1}`)."""
    at = []
    for file, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) and any(_plus_one(v) for v in node.values):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if text.startswith(">=") and ",<" in text:
                    at.append(f"{file}:{node.lineno}")
    return at


def _glibc_defaults() -> list[str]:
    """Every `....get("__glibc", DEFAULT)`: a lockfile's glibc worked out beside the one rule."""
    at = []
    for file, tree in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                first = node.args[0] if node.args else None
                glibc = isinstance(first, ast.Constant) and first.value == "__glibc"
                if node.func.attr == "get" and glibc and len(node.args) == 2:
                    at.append(f"{file}:{node.lineno}")
    return at


def _plus_one(value: ast.expr) -> bool:
    inner = value.value if isinstance(value, ast.FormattedValue) else value
    return isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Add)


def test_the_backend_is_worked_out_by_the_one_rule_alone() -> None:
    assert _backend_fallbacks() == [], "use RunOptions.backend_for / choose_backend"
    # the rule itself, and doctor's (its options are doctor's own, not a run's)
    assert [c.split(":")[0] for c in _calls("choose_backend")] == [
        "options.py",
        "plan/doctor/checks_machine.py",
    ]


def test_a_locked_python_is_looked_for_by_one_rule() -> None:
    assert [c.split(":")[0] for c in _minor_ranges()] == ["machine/host/interpreters.py"]


def test_an_x_y_is_held_against_a_profile_s_range_by_one_rule() -> None:
    # the venv's interpreter search and `lock --python-version` ask the same question
    assert [c.split(":")[0] for c in _calls("minor_fits")] == [
        "lock/making/create.py",
        "machine/host/interpreters.py",
    ]
    assert minor_fits("3.10", ">=3.10.4") and minor_fits("3.12", ">=3.10,<3.13")
    assert not minor_fits("3.9", ">=3.10") and not minor_fits("3.13", ">=3.10,<3.13")


def test_the_venv_search_finds_this_python_for_a_range_that_starts_at_a_patch() -> None:
    # `>=X.Y.Z` admits this X.Y.Z interpreter: the search falls back to its X.Y when the
    # preferred X.Y is absent (it skipped it while it asked whether X.Y.0 fits)
    major, minor, micro = sys.version_info[:3]
    requires = f">={major}.{minor}.{micro},<{major}.{minor + 1}"
    found = find_interpreter(requires, "3.99")
    assert interpreter_version(found) in SpecifierSet(requires)


@pytest.mark.parametrize(
    ("name", "place"),
    [
        ("choose_variant", "plan/choices.py"),  # the CUDA variant, from the driver and --cuda
        ("make_choices", "run/installrun.py"),  # install, plan and bundle runs: one pipeline
    ],
)
def test_the_variant_and_the_run_choices_are_made_in_one_place(name: str, place: str) -> None:
    assert [c.split(":")[0] for c in _calls(name)] == [place]


def test_install_plan_and_lock_find_the_stack_at_a_ref_by_one_rule() -> None:
    # asked_stack: the ref's files from the run's source, the run's indexes; install and plan
    # (plan/refroute) and `lock` (lock/making/lockstack) each name their target and call it
    assert [c.split(":")[0] for c in _calls("run_reach")] == ["lock/making/refstack.py"]
    assert [c.split(":")[0] for c in _calls("asked_stack")] == [
        "lock/making/lockstack.py",
        "plan/refroute.py",
    ]


def test_the_driver_is_read_by_one_rule() -> None:
    # install, plan, bundle and both verifies ask machine.gpu.detect's host_driver; doctor alone
    # reads the sources it is given (a report recorded on another node, tests)
    calls = _calls("detect_driver")
    assert [c.split(":")[0] for c in calls] == [
        "machine/gpu/detect.py",
        "plan/doctor/doctorrun.py",
    ], calls
    assert [c.split(":")[0] for c in _calls("host_driver")] == [
        "machine/gpu/detect.py",
        "run/installrun.py",
    ]
    assert [c.split(":")[0] for c in _calls("gpu_present")] == [
        "run/state/reverify.py",
        "verify/trainroute.py",
    ]


def test_the_driver_rule_counts_the_override_as_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRIVER_OVERRIDE, "580.65.06")
    found = host_driver()
    assert found is not None and found.version == "580.65.06"
    assert gpu_present()


def test_a_lockfiles_glibc_is_read_by_one_rule() -> None:
    # what `lock` keeps from the lock it replaces, and what install, bundle and the lock's own
    # checks build wheel tags for; a raw `.get("__glibc")` (no default: "no need") is another
    # question, asked where an older lock must not be refused
    found = _glibc_defaults()
    assert [c.split(":")[0] for c in found] == ["platforms.py"], found
    assert locked_glibc({}) == DEFAULT_GLIBC
    assert locked_glibc({"__glibc": "2.34", "__cuda": "12.8"}) == "2.34"


def test_the_backend_rule_takes_the_flag_then_the_record_then_the_profile() -> None:
    venv, conda = EnvSpec(backend="venv"), EnvSpec(backend="conda")
    assert choose_backend("venv", conda, "conda") == "venv"
    assert choose_backend(None, conda, "venv") == "venv"
    assert choose_backend(None, venv) == "venv"
    assert choose_backend(None, None) == DEFAULT_BACKEND == EnvSpec().backend
    assert (
        RunOptions(profile="cpu", prefix=None, backend="conda").backend_for(venv, "venv") == "conda"
    )


def test_a_locked_python_is_found_by_its_x_y_on_this_machine() -> None:
    mine = "{}.{}.{}".format(*sys.version_info[:3])
    assert has_python(mine)
    assert not has_python("3.2.0")
