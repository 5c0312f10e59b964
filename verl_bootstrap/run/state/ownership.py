"""Whose an env is. The tool uses the env at a prefix (runs, activates, verifies, plans, installs,
updates, removes, lists or describes it) only when the prefix, its `.verl-bootstrap/` and the
files it runs or reads there are this user's or root's and writable by no one else: the rule the
caches follow (paths.not_private), ACLs included. The rule itself (which parts, what private
means) is probes/envowner.py, stdlib only: `cluster verify` sends it to each node, whose report
applies it before it runs anything of the env there. This module says it: messages, hints, exit.

A /tmp or /scratch prefix is purged now and then, and anyone may make the folder again: with a
`bin/python`, a conda activation hook and a `state.json` of theirs, it would otherwise run their
code as you (`run NAME`), or name the program your next `plan` runs (a recorded `--python`).
The folders above the prefix are not held to this: an env in a lab's group-writable folder stays
usable, and a lab mate who moves it away and puts a folder or link of theirs there is refused,
since the prefix is then theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import Refused
from verl_bootstrap.probes import envowner
from verl_bootstrap.probes.envowner import owner_of, someone_elses

__all__ = ["Foreign", "check_file", "check_yours", "not_yours", "owner_of", "someone_elses"]


@dataclass(frozen=True)
class Foreign:
    """The first part of an env that is not this user's: which, why, and whether the prefix
    folder itself is another user's (made again after a purge, say)."""

    prefix: Path
    part: Path
    why: str  # "belongs to another user, nobody (uid 65534)", "is writable by others (mode 777)"
    theirs: bool

    @property
    def reason(self) -> str:
        return f"{self.part} {self.why}"

    @property
    def hint(self) -> str:
        if self.theirs:
            return (
                "another user made that folder (a purged /tmp or /scratch prefix made again, "
                "say): build your own env under another --prefix; `verl-bootstrap envs prune` "
                "forgets this one"
            )
        return (
            "an env is used only when its folder and what the tool runs or reads there are yours "
            f"(or root's) and no one else can write them: make {self.part} so (`chmod go-w`, "
            "`setfacl -b`), or delete it if you did not put it there"
        )


def not_yours(prefix: Path) -> Foreign | None:
    """Why the env at `prefix` is not this user's to use (None: it is, or nothing is there): its
    folder, then what inside it the tool runs or reads, first found first."""
    found = envowner.not_yours(prefix)
    if found is None:
        return None
    part, why = found
    return Foreign(prefix, part, why, theirs=someone_elses(prefix))


def check_yours(prefix: Path, *, command: str = "") -> None:
    """Refused (exit 3), naming the part and its owner, unless the env at `prefix` is this
    user's (not_yours)."""
    found = not_yours(prefix)
    if found is not None:
        said = f"{command}: " if command else ""
        data = {"prefix": str(prefix), "part": str(found.part), "theirs": found.theirs}
        raise Refused(
            f"{said}the env at {prefix} is not yours: {found.reason}",
            hint=found.hint,
            data={**data, "why": found.why},
        )


def check_file(path: Path, *, what: str) -> None:
    """Refused unless the file at `path` and its folder are this user's or root's and writable
    by no one else: a file the tool reads as the user's own (a state file, the list of envs)."""
    for part in (path.parent, path):
        why = envowner.foreign(part)
        if why is not None:
            raise Refused(
                f"the {what} {path} is not yours: {part} {why}",
                hint="the tool reads it only when only you (or root) can have written it: "
                "delete it if you did not put it there, or make it so (`chmod go-w`)",
                data={"path": str(path), "part": str(part), "why": why},
            )
