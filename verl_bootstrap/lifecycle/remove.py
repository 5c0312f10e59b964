"""Removing an env: only what the tool made, and nothing at all when the prefix holds anything else.

What the tool made is the list of top-level names its runs created (kept in the state) and, inside
them, the files its installs made (verl_bootstrap.lifecycle.owned). A name outside that list, a file
at any depth that no install made, or uncommitted work in verl's checkout refuses the removal
before anything is deleted. The prefix lock is held throughout, so a running install is never
pulled from under.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import Refused
from verl_bootstrap.lifecycle.inspect import disk_usage, load_state
from verl_bootstrap.lifecycle.owned import foreign_files
from verl_bootstrap.lifecycle.registry import forget
from verl_bootstrap.lifecycle.runlog import PREFIX_ITSELF, top_level
from verl_bootstrap.paths import STATE_DIRNAME, checkout_dir, guard_file, state_dir
from verl_bootstrap.run.guard import guarding

__all__ = ["Removal", "check_removal", "remove_env"]


@dataclass(frozen=True)
class Removal:
    """What `remove` deletes: these entries of the prefix, then the prefix if the tool made it."""

    prefix: Path
    entries: tuple[str, ...]
    prefix_too: bool
    size: int


def check_removal(prefix: Path) -> Removal:
    """What removing `prefix` deletes; Refused (nothing deleted) when it holds anything else."""
    if prefix.is_symlink():
        raise Refused(f"{prefix} is a symbolic link", hint="pass the folder it points to")
    state = load_state(prefix)
    if not state.made:
        raise Refused(
            f"{prefix} was made before verl-bootstrap recorded what it creates",
            hint="check its contents and delete it yourself",
        )
    foreign = sorted(top_level(prefix) - set(state.made))
    if foreign:
        raise Refused(
            f"{prefix} holds files verl-bootstrap did not make: {', '.join(foreign)}; "
            "nothing was deleted",
            hint="move them out of the prefix first",
        )
    _refuse_foreign_files(prefix)
    _refuse_checkout_work(checkout_dir(prefix))
    entries = tuple(sorted(n for n in state.made if n not in (PREFIX_ITSELF, STATE_DIRNAME)))
    return Removal(prefix, entries, PREFIX_ITSELF in state.made, disk_usage(prefix))


def remove_env(prefix: Path) -> Removal:
    """Check again under the prefix lock, then delete; the state folder goes last."""
    with _locked(prefix):
        removal = check_removal(prefix)
        for name in removal.entries:
            _delete(prefix / name)
        _delete(state_dir(prefix))
    if removal.prefix_too and not any(prefix.iterdir()):
        prefix.rmdir()
    forget(prefix)
    return removal


@contextmanager
def _locked(prefix: Path) -> Iterator[None]:
    with guarding(guard_file(prefix)):
        yield


def _refuse_foreign_files(prefix: Path) -> None:
    """A file anywhere inside that no install, package or env backend made is the user's."""
    foreign = foreign_files(prefix)
    if foreign:
        shown = ", ".join(foreign[:_SHOWN]) + (
            f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
        )
        raise Refused(
            f"{prefix} holds files verl-bootstrap did not make: {shown}; nothing was deleted",
            hint="move them out of the prefix first",
        )


_SHOWN = 10


def _refuse_checkout_work(checkout: Path) -> None:
    """Edits or new files in verl's git checkout are the user's work: never deleted."""
    if not (checkout / ".git").exists():
        return
    done = proc.capture(["git", "-C", str(checkout), "status", "--porcelain"])
    status = done.stdout if done.returncode == 0 else f"?? (git status failed: {done.stderr})"
    if status.strip():
        changed = ", ".join(line[3:] for line in status.splitlines()[:5])
        raise Refused(
            f"verl's checkout {checkout} has changes of yours ({changed}); nothing was deleted",
            hint="commit and push them, or copy them elsewhere, then remove again",
        )


def _delete(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
