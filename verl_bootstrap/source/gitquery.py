"""The questions the tool asks of a git checkout (verl's, in an env), through GitPython.

Its HEAD, whether tracked files changed, which files git lists as changed, untracked or ignored,
the local branches, the stash and the commits on no remote branch: each is asked of git itself,
in the checkout, through GitPython's repository (its git commands, `is_dirty`, its commit
objects), never through GitPython's own reading of the ref files, which does not know
git's newer ref store (reftable: a branch there would read as no branch at all, and the user's
work as nothing to keep).

These are local questions: no network, no credentials, nothing to redact but the checkout's own
paths. What goes over the network (`ls-remote`, the fetches into the source cache, a ref the
checkout lacks) runs through verl_bootstrap.proc instead, for its time limit, its log, its
credential handling and its redaction, which GitPython would bypass.

GitPython is imported in the functions that ask: it is slow to import (and runs `git version`
when it is), and most commands never look at a checkout.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from git import Repo

__all__ = [
    "GitQueryFailed",
    "NotARepository",
    "changed_paths",
    "commit_named",
    "current_branch",
    "has_changes",
    "head_commit",
    "local_branches",
    "opened",
    "stash_entries",
    "unpushed_commits",
]


class GitQueryFailed(Exception):
    """git could not answer: `question` names what was asked, `reason` is git's own last word."""

    def __init__(self, question: str, reason: str, cause: Exception | None = None) -> None:
        super().__init__(f"git {question} failed: {reason}")
        self.question = question
        self.reason = reason
        self.cause = cause  # what GitPython raised


class NotARepository(GitQueryFailed):
    """The folder is not a git checkout of its own (a parent's repository does not count)."""


@contextmanager
def opened(checkout: Path) -> Iterator[Repo]:
    """`checkout` as a GitPython repository; the git processes it keeps end when the block does."""
    import git  # noqa: PLC0415 - GitPython is slow to import; only a look at a checkout needs it

    try:
        with _asking("open"):
            repo = git.Repo(checkout)  # never a parent folder's repository
    except GitQueryFailed as exc:
        if isinstance(exc.cause, (git.InvalidGitRepositoryError, git.NoSuchPathError)):
            raise NotARepository("open", f"{checkout} is not a git repository") from None
        raise
    with repo:
        yield repo


@contextmanager
def _asking(question: str) -> Iterator[None]:
    """A failure of git (or of GitPython reading it) while asking, as GitQueryFailed."""
    import git  # noqa: PLC0415 - as in opened(): already imported there

    try:
        yield
    except git.GitCommandError as exc:
        raise GitQueryFailed(question, _last_line(str(exc.stderr)) or str(exc), exc) from None
    except (git.GitError, OSError, ValueError) as exc:
        raise GitQueryFailed(question, str(exc) or type(exc).__name__, exc) from None


def _last_line(stderr: str) -> str:
    """git's last line of stderr, without GitPython's `stderr: '…'` around it."""
    text = stderr.strip().removeprefix("stderr:").strip().removeprefix("'").removesuffix("'")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][-200:] if lines else ""


def head_commit(repo: Repo) -> str:
    """The commit checked out (HEAD), as git resolves it in whatever ref store the repo uses."""
    with _asking("rev-parse"):
        return str(repo.git.rev_parse("--verify", "HEAD^{commit}"))


def commit_named(repo: Repo, rev: str) -> str | None:
    """The commit `rev` names in the checkout (a tag peeled), or None when it names none here."""
    import git  # noqa: PLC0415 - as in opened(): already imported there

    if rev.startswith("-"):  # an option to git, not a name
        return None
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}"))
    except git.GitCommandError:
        return None


def has_changes(repo: Repo) -> bool:
    """Tracked files changed, staged or not (a new file git does not track is not counted)."""
    with _asking("diff"):
        return repo.is_dirty(index=True, working_tree=True, untracked_files=False)


def changed_paths(repo: Repo) -> list[tuple[str, str]]:
    """(git's two-letter status, path) of every file git lists as changed, staged, untracked
    or ignored, each file inside an untracked or ignored folder on its own.

    One `git status -z` says all of it: GitPython has no listing of ignored files, and its
    untracked files are read from git's quoted output, not the NUL-separated one. A name that
    is not UTF-8 is shown with its odd bytes escaped (it is only shown, never opened).
    """
    args = ["--porcelain=v1", "-z", "--ignored", "--untracked-files=all"]
    with _asking("status"):
        out = repo.git.status(*args, stdout_as_string=False, strip_newline_in_stdout=False)
    entries = iter(bytes(out).decode("utf-8", "backslashreplace").split("\0"))
    found = []
    for entry in entries:
        if len(entry) < 4:
            continue
        if entry[0] in "RC":
            next(entries, None)  # a rename's or copy's second field is where it came from
        found.append((entry[:2], entry[3:]))
    return found


def current_branch(repo: Repo) -> str | None:
    """The branch checked out; None on a detached HEAD (as the tool leaves its checkouts)."""
    import git  # noqa: PLC0415 - as in opened(): already imported there

    try:
        return str(repo.git.symbolic_ref("--quiet", "--short", "HEAD")) or None
    except git.GitCommandError:
        return None  # detached (or unreadable): every local branch is then listed as work


def local_branches(repo: Repo) -> list[str]:
    """Every local branch's name, as git lists them (GitPython's `heads` reads ref files)."""
    with _asking("for-each-ref"):
        out = str(repo.git.for_each_ref("--format=%(refname:short)", "refs/heads"))
    return out.splitlines()


def stash_entries(repo: Repo) -> list[tuple[str, str]]:
    """(stash@{n}, its message) of each stash entry, newest first, numbered as git numbers them."""
    with _asking("stash"):
        out = str(repo.git.stash("list", "--format=%gd %s"))
    entries = [line.partition(" ") for line in out.splitlines()]  # a stash@{n} has no space
    return [(entry, what) for entry, _, what in entries]


def unpushed_commits(repo: Repo, known: list[str]) -> list[tuple[str, str]]:
    """(short id, subject) of the commits of HEAD and the local branches that no remote branch
    or tag holds, nor any commit of `known` (one the tool checked out itself)."""
    revs = ["HEAD", "--branches", "--not", "--remotes", "--tags", *known, "--"]
    with _asking("rev-list"):
        commits = [repo.commit(sha) for sha in str(repo.git.rev_list(*revs)).split()]
        return [(c.hexsha[:12], str(c.summary)) for c in commits]
