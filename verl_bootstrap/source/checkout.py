"""Moving verl's checkout to another ref, safely: only a checkout the tool made and left as it was
(its HEAD is still the commit the tool checked out) and that holds no work of the user's (no edit,
no new file, no file git ignores: verl_bootstrap.source.sourcework) is ever moved.

The tool's mark sits inside `.git`, so it never shows as a change in the user's working tree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.redact import redact
from verl_bootstrap.source.sourcework import MARK, checkout_work

__all__ = ["commit_of", "mark_made", "move_checkout"]

_ENV = {"GIT_TERMINAL_PROMPT": "0"}  # a prompt for credentials would hang a batch run


def mark_made(repo: Any) -> None:
    """Record that the tool checked out HEAD in this repo (called after a clone or a move)."""
    (Path(repo.git_dir) / MARK).write_text(repo.head.commit.hexsha + "\n", encoding="utf-8")


def commit_of(repo: Any, ref: str) -> str | None:
    """The commit `ref` names, fetched from the checkout's origin when the clone lacks it."""
    import git  # noqa: PLC0415 - GitPython is slow to import; only git sources need it

    for rev in (f"{ref}^{{commit}}", f"origin/{ref}^{{commit}}"):
        try:
            return str(repo.git.rev_parse("--verify", "--quiet", rev))
        except git.GitCommandError:
            continue
    try:
        repo.git.fetch("--depth", "1", "origin", ref, env=_ENV)
        return str(repo.git.rev_parse("FETCH_HEAD^{commit}"))
    except git.GitCommandError as exc:
        raise StepFailed(
            f"could not get verl ref {ref!r} into the checkout {repo.working_tree_dir}",
            hint=f"check the ref (git said: {redact(str(exc.stderr or exc)).strip()[-300:]})",
        ) from None


def move_checkout(repo: Any, ref: str, wanted: str) -> str:
    """Check out `wanted` (the commit of `ref`); refuse a checkout the tool did not leave as is."""
    head = repo.head.commit.hexsha
    path = repo.working_tree_dir
    if not _made_here(repo, head):
        raise InputError(
            f"verl checkout {path} is at {head[:12]}, not at {ref} ({wanted[:12]}), and it was "
            "not left there by verl-bootstrap",
            hint=f"run `git -C {path} checkout {ref}` yourself, or use another --prefix; "
            "verl-bootstrap never moves a checkout it did not make",
        )
    work = checkout_work(Path(str(path)))
    if work:  # checking out another commit may replace or delete them (an ignored file too)
        raise InputError(
            f"verl checkout {path} holds work of yours ({', '.join(work[:10])}), so it is not "
            f"moved to {ref}",
            hint="copy them elsewhere (or commit and push them), or use another --prefix",
        )
    repo.git.checkout("--quiet", "--detach", wanted, env=_ENV)
    mark_made(repo)
    return f"moved the verl checkout from {head[:12]} to {ref} ({wanted[:12]})"


def _made_here(repo: Any, head: str) -> bool:
    mark = Path(repo.git_dir) / MARK
    return mark.is_file() and mark.read_text(encoding="utf-8").strip() == head
