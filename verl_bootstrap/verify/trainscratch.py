"""The training step's scratch folder (`verify --train`, `--train-dir DIR`): made and checked as a
cache is (paths.private_folder), since what it holds is read back as code.

verl loads its checkpoint with `torch.load(weights_only=False)` on resume, as the tool's weights
probe does: a pickle, so whoever can write the checkpoint runs code as the user. The step's log
is truncated and appended to: a link planted at its name would be written through. So the folder
is this user's alone (a folder another user made first in a sticky /tmp, or one others can write,
is refused), the log is made anew without following a link, and the checkpoint is checked again
before anything loads it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from verl_bootstrap.errors import InputError, Refused
from verl_bootstrap.paths import not_private, others_can_write, private_folder, state_dir

__all__ = ["fresh_log", "not_loadable", "train_folder"]

_HINT = (
    "name a folder only you can write (one you made, mode 0700, e.g. `mkdir -m 700 DIR` on a "
    "node-local disk), or leave --train-dir out: the env's own .verl-bootstrap/train/ is used"
)


def train_folder(prefix: Path, given: Path | None) -> Path:
    """The scratch folder of `verify --train` in the env at `prefix`: `given` (--train-dir),
    made 0700 and private all the way down, else the env's own .verl-bootstrap/train/ (the env
    itself is checked as the user's: run/state/ownership.py); Refused naming what is not private."""
    if given is None:
        return _own_folder(state_dir(prefix) / "train")
    if given.exists() and not given.is_dir():
        raise InputError(f"--train-dir {given} is not a folder", hint=_HINT)
    why = private_folder(given)
    if why is not None:
        raise Refused(f"--train-dir {given} is not private: {why}", hint=_HINT)
    return given


def _own_folder(folder: Path) -> Path:
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    why = not_private(folder, folder=True)
    if why is not None:
        raise Refused(f"the training step's folder {folder} {why}", hint=_HINT)
    return folder


def fresh_log(path: Path) -> Path:
    """An empty log at `path`, made anew (O_EXCL, O_NOFOLLOW): what was there, a link included,
    is removed, never written through."""
    path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    os.close(os.open(path, flags, 0o600))
    return path


def not_loadable(checkpoint: Path) -> str | None:
    """Why the checkpoint folder may not be loaded (None: it may): a folder or file in it, or
    the folder itself, another user's or writable by others. Checked just before the weights
    are read and before the resume, so nothing another user wrote is unpickled."""
    for root, folders, files in os.walk(checkpoint):
        for path in [Path(root), *(Path(root) / n for n in [*folders, *files])]:
            why = _not_own(path)
            if why is not None:
                return f"{path} {why}"
    return _not_own(checkpoint)  # os.walk says nothing of a folder it cannot enter


def _not_own(path: Path, *, follow: bool = True) -> str | None:
    try:
        info = path.lstat()
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if info.st_uid != os.geteuid():
        return f"is another user's (uid {info.st_uid})"
    if stat.S_ISLNK(info.st_mode):  # the walk does not follow it: what it leads to, here
        target = Path(os.path.realpath(path))
        why = _not_own(target, follow=False) if follow else "is a link"
        return None if why is None else f"leads to {target}, which {why}"
    why = others_can_write(path, info)
    return None if why is None else f"is writable by others ({why})"
