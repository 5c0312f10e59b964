"""Read pytest's JUnit XML report into outcomes (pytest writes it; we only read it)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import InputError

__all__ = ["Case", "read_junit"]


@dataclass(frozen=True)
class Case:
    """One test case (or one file that failed to collect) and how it ended."""

    nodeid: str
    outcome: str  # passed | failed | error | skipped
    message: str = ""
    text: str = ""


def read_junit(path: Path) -> tuple[Case, ...]:
    """Every test case of the report, in report order."""
    try:
        root = ET.parse(path).getroot()  # pytest wrote it, for this run
    except (OSError, ET.ParseError) as exc:
        raise InputError(f"cannot read pytest's report {path}: {exc}") from None
    # an interrupted run leaves a nameless, empty entry for the test it stopped in: not a case
    return tuple(_case(e) for e in root.iter("testcase") if e.get("name"))


def _case(element: ET.Element) -> Case:
    nodeid = _nodeid(element)
    for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        child = element.find(tag)
        if child is not None:
            message = child.get("message", "")
            return Case(nodeid, outcome, message, child.text or "")
    return Case(nodeid, "passed")


def _nodeid(element: ET.Element) -> str:
    """`tests/a/b_on_cpu.py::Class::test` from classname `tests.a.b_on_cpu.Class` and name."""
    classname, name = element.get("classname", ""), element.get("name", "")
    if not classname:  # a file that failed to collect: its dotted module path is the name
        return name.replace(".", "/") + ".py"
    return f"{classname}::{name}"
