"""Reusing verl's checkout, and moving it to another ref safely: only a checkout the tool made and
left as it was (its HEAD is still the commit the tool checked out) and that holds no work of the
user's (no edit, no new file, no file git ignores: verl_bootstrap.source.sourcework) is moved.

The tool's mark sits inside `.git`, so it never shows as a change in the user's working tree.
The questions (where HEAD is, which commit a ref names) are asked through GitPython
(verl_bootstrap.source.gitquery); the fetch of a ref the clone lacks and the checkout itself run
through verl_bootstrap.proc: a fetch goes over the network, so it needs proc's time limit, its
credential handling (a login in verl's URL reaches git in its environment, never its argv) and
its redaction; and what changes the checkout belongs in the run's log. GitPython would bypass
all four.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.source import gitquery
from verl_bootstrap.source.gitquery import GitQueryFailed, NotARepository
from verl_bootstrap.source.sourcework import MARK, checkout_work
from verl_bootstrap.source.spec import SourceResult, SourceSpec

if TYPE_CHECKING:
    from git import Repo

__all__ = ["reuse_checkout"]

_ENV = {"GIT_TERMINAL_PROMPT": "0"}  # a prompt for credentials would hang a batch run
_TIMEOUT_S = 600.0  # a fetch of one commit; an unreachable host fails well before


def reuse_checkout(spec: SourceSpec, log_path: Path) -> SourceResult:
    """The existing git checkout at `spec`'s ref: as it is when it is there, else moved there
    when the tool made it and nothing of the user's is in it; refused otherwise."""
    try:
        with gitquery.opened(spec.checkout) as repo:
            return _reused(repo, spec, log_path)
    except NotARepository:
        raise InputError(
            f"{spec.checkout} exists and is not a verl checkout made by verl-bootstrap",
            hint="move it away, or choose another --prefix; it is never overwritten",
        ) from None
    except GitQueryFailed as exc:
        raise InputError(
            f"cannot read the verl checkout {spec.checkout}: {exc}",
            hint="repair it with git, or choose another --prefix; it is never overwritten",
        ) from None


def _reused(repo: Repo, spec: SourceSpec, log_path: Path) -> SourceResult:
    if gitquery.has_changes(repo):
        raise InputError(
            f"verl checkout {spec.checkout} has local changes",
            hint="commit or stash them (they are never overwritten), or choose another --prefix",
        )
    head = gitquery.head_commit(repo)
    wanted = _commit_of(repo, spec.repo, spec.ref, log_path)
    note = "reused the existing checkout"
    if wanted != head:  # another ref: moved only when the tool made it and it is untouched
        note = _move(repo, spec.ref, wanted, log_path)
    return SourceResult(
        kind="git",
        repo=spec.repo,
        ref=spec.ref,
        path=spec.checkout,
        commit=gitquery.head_commit(repo),
        note=note,
    )


def _commit_of(repo: Repo, url: str, ref: str, log_path: Path) -> str:
    """The commit `ref` names, fetched from verl's repository `url` when the clone lacks it."""
    for rev in (ref, f"origin/{ref}"):
        found = gitquery.commit_named(repo, rev)
        if found:
            return found
    # `--` first: neither the URL nor the ref is ever read as an option of git's
    done = _git(repo, log_path, "fetch", "--quiet", "--depth", "1", "--", url, ref)
    found = gitquery.commit_named(repo, "FETCH_HEAD") if done.returncode == 0 else None
    if found is None:
        said = "it did not finish in time" if done.timed_out else (done.tail or ("",))[-1]
        raise StepFailed(
            f"could not get verl ref {ref!r} into the checkout {repo.working_tree_dir}",
            hint=f"check the ref (git said: {said.strip()[-300:]})",
        )
    return found


def _move(repo: Repo, ref: str, wanted: str, log_path: Path) -> str:
    """Check out `wanted` (the commit of `ref`); refuse a checkout the tool did not leave as is."""
    head = gitquery.head_commit(repo)
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
    _git(repo, log_path, "checkout", "--quiet", "--detach", wanted, check=True)
    (Path(repo.git_dir) / MARK).write_text(wanted + "\n", encoding="utf-8")
    return f"moved the verl checkout from {head[:12]} to {ref} ({wanted[:12]})"


def _git(repo: Repo, log_path: Path, *args: str, check: bool = False) -> proc.Completed:
    """git in the checkout, its command and output (credentials masked) in the run's log."""
    where = Path(str(repo.working_tree_dir))
    return proc.run(
        ["git", *args], log_path=log_path, env=_ENV, cwd=where, check=check, timeout=_TIMEOUT_S
    )


def _made_here(repo: Repo, head: str) -> bool:
    mark = Path(repo.git_dir) / MARK
    return mark.is_file() and mark.read_text(encoding="utf-8").strip() == head
