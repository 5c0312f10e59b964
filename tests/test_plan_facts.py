"""The plan says each fact once: for every shipped profile and variant, on its default route (the
committed lockfile) and resolving, read as a user reads `verl-bootstrap plan`, on the recorded
590 host (an H100, `nvidia-smi` output in tests/data/nvidia/).

A fact here is what the text can be checked for without understanding it: a build variable and
its value (one value, said once, in a step), where verl comes from (the description and the
command agree), a substitution of one of verl's requirements (named once in the plan), a hash
gap (said in the header, not again in a step), and any clause of a line (said once in its step,
or in the header). Two asides back to back, `) (`, are one fact said twice or two run together.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from nvidiatext import parse_smi_table
from scaffold import run

from verl_bootstrap.errors import EXIT_OK
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.profile import list_profiles, load_profile
from verl_bootstrap.run import installrun

H100_590 = Path(__file__).parent / "data" / "nvidia" / "590.48.01-H100-table.txt"
CASES = [
    (name, variant, route)
    for name in list_profiles()
    for variant in load_profile(name).cuda_variants
    for route in ((), ("--resolve",))
]
_ASSIGNMENT = re.compile(r"(?<![\w-])([A-Z][A-Z0-9_]{2,})=(\S+)")
_SUBSTITUTION = re.compile(r"^\s+(?:instead of verl's (\S+):|verl's (\S+) from )")


def _driver() -> DriverInfo:
    driver = parse_smi_table(H100_590.read_text(encoding="utf-8"))
    assert driver is not None
    return driver


def plan_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    return out


def blocks(text: str) -> tuple[list[str], list[list[str]]]:
    """The header's lines, and each step's lines (its heading first)."""
    header: list[str] = []
    steps: list[list[str]] = []
    for line in text.splitlines():
        if re.match(r"^\d+\. \S+ \[", line):
            steps.append([line])
        elif steps:
            steps[-1].append(line)
        else:
            header.append(line)
    return header, steps


def clauses(lines: list[str]) -> list[str]:
    """Each clause of the lines (split at ';', ':' and parentheses) of four words or more."""
    out = []
    for line in lines:
        if line.lstrip().startswith("$ "):
            continue  # a command is not a statement
        for part in re.split(r"[;:()]", line):
            words = part.split()
            if len(words) >= 4:
                out.append(" ".join(words).lower())
    return out


def repeated(items: list[str]) -> list[str]:
    return sorted(item for item, count in Counter(items).items() if count > 1)


def variables_said_twice(step: list[str]) -> list[str]:
    """A variable given two values, or one value twice, in one step's text."""
    said = [
        m for line in step if not line.lstrip().startswith("$ ") for m in _ASSIGNMENT.findall(line)
    ]
    values: dict[str, set[str]] = {}
    for name, value in said:
        values.setdefault(name, set()).add(value.rstrip(",;)"))
    twice = [n for n, v in values.items() if len(v) > 1]
    return sorted({*twice, *repeated([n for n, _ in said])})


def source_contradiction(step: list[str]) -> str | None:
    """fetch-source: a git clone beside a description that takes the release sdist, or none
    beside one that takes git."""
    said = " ".join(line for line in step[1:] if not line.lstrip().startswith("$ "))
    clones = any("$ git clone" in line for line in step)
    takes_sdist = "its release sdist" in said
    if clones and takes_sdist:
        return "it says the release sdist and shows a git clone"
    if not clones and not takes_sdist:
        return "it says git and shows no clone"
    return None


def test_the_checks_catch_what_they_look_for() -> None:
    """Each rule, on the sentences the plan printed before it said each fact once."""
    assert variables_said_twice(
        ["   the lockfile sets: FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS=4", "   env: MAX_JOBS=2"]
    ) == ["MAX_JOBS"]
    fetch = [
        "2. fetch-source [fetch-source]",
        "   get verl v0.9.1: its release sdist x",
        "   $ git clone",
    ]
    assert source_contradiction(fetch) == "it says the release sdist and shows a git clone"
    conda = "checked by nothing (the lock was made offline; regenerate it) (the channels were down)"
    assert ") (" in conda
    mbridge = [
        "     verl's mbridge from the default index (a reason)",
        "     verl's mbridge from the default index (a reason)",
    ]
    assert repeated(clauses(mbridge)) == ["verl's mbridge from the default index"]


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{n}-{v}{'-resolve' if r else ''}" for n, v, r in CASES]
)
def test_the_plan_says_each_fact_once(
    case: tuple[str, str, tuple[str, ...]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, variant, route = case
    monkeypatch.setattr(installrun, "host_driver", _driver)
    argv = ["plan", "--profile", name, "--cuda", variant, "--prefix", str(tmp_path / "env"), *route]
    text = plan_text(argv, capsys)
    header, steps = blocks(text)
    assert [line for line in text.splitlines() if ") (" in line] == []
    assert repeated(clauses(header)) == []
    said_in_header = set(clauses([line for line in header if line.startswith("not hash-checked")]))
    substitutions = []
    for step in steps:
        assert repeated(clauses(step)) == [], step[0]
        assert variables_said_twice(step) == [], step[0]
        assert set(clauses(step)) & said_in_header == set(), step[0]
        substitutions += _substitutions(step)
        if step[0].startswith("2. fetch-source"):
            assert source_contradiction(step) is None, step
    assert repeated(substitutions) == []


def _substitutions(step: list[str]) -> list[str]:
    """The requirement of verl's each substitution line of a step names."""
    return [next(g for g in m.groups() if g) for line in step if (m := _SUBSTITUTION.match(line))]
