"""Removing an env: only what the tool made, and nothing at all when the prefix holds anything else.

What the tool made is the list of top-level names its runs created (kept in the state) and, inside
them, the files its installs made (verl_bootstrap.run.state.owned). A name outside that list, a file
at any depth that no install made, or any work of the user's in verl's checkout (an edit, a new
file, a file git ignores: verl_bootstrap.source.sourcework) refuses the removal before anything
is deleted; `keep_source` removes the env and leaves the checkout as it is. The prefix lock is
held throughout, so a running install is never pulled from under.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import Refused
from verl_bootstrap.paths import STATE_DIRNAME, checkout_dir, guard_file, state_dir
from verl_bootstrap.run.state.envindex import forget
from verl_bootstrap.run.state.guard import guarding
from verl_bootstrap.run.state.inspect import disk_usage, load_state
from verl_bootstrap.run.state.owned import foreign_files
from verl_bootstrap.run.state.runlog import PREFIX_ITSELF, top_level
from verl_bootstrap.source.sourcework import checkout_work

__all__ = ["Removal", "check_removal", "remove_env"]


@dataclass(frozen=True)
class Removal:
    """What `remove` deletes: these entries of the prefix (but `kept`, verl's checkout, when it
    stays), then the prefix if the tool made it and nothing is kept."""

    prefix: Path
    entries: tuple[str, ...]
    prefix_too: bool
    size: int
    kept: Path | None = None


def check_removal(prefix: Path, *, keep_source: bool = False) -> Removal:
    """What removing `prefix` deletes; Refused (nothing deleted) when it holds anything else.

    A folder that cannot be read is Refused too: what it holds cannot be checked."""
    try:
        return _check(prefix, keep_source=keep_source)
    except OSError as exc:
        where = exc.filename or prefix
        raise Refused(
            f"cannot look inside {where} ({exc.strerror or exc}), so what it holds cannot be "
            "checked; nothing was deleted",
            hint="make it readable to you (chmod u+rx), or delete the env yourself",
            data={"unreadable": str(where), "deleted": False},
        ) from None


def _check(prefix: Path, *, keep_source: bool) -> Removal:
    if prefix.is_symlink():
        raise Refused(f"{prefix} is a symbolic link", hint="pass the folder it points to")
    state = load_state(prefix)
    if not state.made:
        raise Refused(
            f"{prefix} was made before verl-bootstrap recorded what it creates",
            hint="check its contents and delete it yourself",
        )
    checkout = checkout_dir(prefix)
    kept = checkout if keep_source and (checkout.exists() or checkout.is_symlink()) else None
    _refuse_users_files(prefix, set(state.made), None if kept else checkout)
    entries = tuple(sorted(n for n in state.made if n not in (PREFIX_ITSELF, STATE_DIRNAME)))
    size = disk_usage(prefix) - (disk_usage(checkout) if kept else 0)
    return Removal(prefix, entries, PREFIX_ITSELF in state.made and kept is None, size, kept)


def remove_env(prefix: Path, *, keep_source: bool = False) -> Removal:
    """Check again under the prefix lock, then delete; the state folder goes last."""
    with _locked(prefix):
        removal = check_removal(prefix, keep_source=keep_source)
        for name in removal.entries:
            _delete(prefix / name, keep=removal.kept)
        _delete(state_dir(prefix))
    if removal.prefix_too and not any(prefix.iterdir()):
        prefix.rmdir()
    forget(prefix)
    return removal


@contextmanager
def _locked(prefix: Path) -> Iterator[None]:
    with guarding(guard_file(prefix)):
        yield


def _refuse_users_files(prefix: Path, made: set[str], checkout: Path | None) -> None:
    """Every file of the user's, of every kind, in one refusal: names at the top the tool did not
    make and files inside that no install, package or env backend made; and (when the checkout
    goes) edits, new files and files git ignores in verl's checkout."""
    foreign = list(dict.fromkeys([*sorted(top_level(prefix) - made), *foreign_files(prefix)]))
    work = checkout_work(checkout) if checkout is not None else []
    found = [f"{prefix} holds files verl-bootstrap did not make: {_shown(foreign)}"] * bool(foreign)
    if work:
        found.append(f"verl's checkout {checkout} holds work of yours: {_shown(work)}")
    if not found:
        return
    hints = ["move them out of the prefix first"] * bool(foreign)
    if work:
        hints.append(
            "copy your work in the checkout elsewhere (or commit and push it), or pass "
            "--keep-source to remove the env and keep the checkout as it is"
        )
    data = {"foreign": foreign, "work": work, "deleted": False}
    raise Refused("; ".join(found) + "; nothing was deleted", hint="; ".join(hints), data=data)


_SHOWN = 10


def _shown(paths: list[str]) -> str:
    """The first few paths, and how many more there are."""
    more = f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else ""
    return ", ".join(paths[:_SHOWN]) + more


def _delete(path: Path, keep: Path | None = None) -> None:
    """Delete `path`; when `keep` lies inside it, everything but `keep` (links not followed)."""
    if keep is not None and path != keep and keep.is_relative_to(path) and not path.is_symlink():
        for child in path.iterdir():
            if child != keep:
                _delete(child, keep)
        return
    if path == keep:
        return
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
