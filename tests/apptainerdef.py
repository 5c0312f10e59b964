"""A strict reader of Apptainer definition files, for the tests (no parser library on the index
reads ours: spython's takes any line that mentions "bootstrap" for the header).

The rules checked are Apptainer's: the header (`Bootstrap:` first, then `From:`) comes before any
section, sections are `%name` lines from Apptainer's list, each at most once, and a section's body
runs to the next section.
"""

from __future__ import annotations

from dataclasses import dataclass

# Apptainer's sections (user guide, "Definition Files"), in the order the docs present them
SECTIONS = (
    "arguments",
    "setup",
    "files",
    "environment",
    "post",
    "runscript",
    "startscript",
    "test",
    "labels",
    "help",
)


@dataclass(frozen=True)
class Definition:
    """A parsed definition: its header keywords and its sections' bodies, in file order."""

    header: dict[str, str]
    sections: dict[str, list[str]]


def parse_definition(text: str) -> Definition:
    """Parse `text`; a broken rule raises ValueError naming the line."""
    header: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("%"):
            name = line[1:].split()[0]
            if name not in SECTIONS or name in sections:
                raise ValueError(f"line {number}: unknown or repeated section %{name}")
            current = sections.setdefault(name, [])
        elif current is not None:
            current.append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition(":")
            if not sep or (not header and key != "Bootstrap"):
                raise ValueError(f"line {number}: the header must start with Bootstrap: ({line!r})")
            header[key.strip()] = value.strip()
    if "From" not in header:
        raise ValueError("no From: in the header")
    return Definition(header=header, sections=sections)


def body(definition: Definition, section: str) -> list[str]:
    """A section's non-empty lines, dedented."""
    return [line.strip() for line in definition.sections.get(section, []) if line.strip()]
