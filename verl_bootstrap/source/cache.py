"""verl's source from a per-user cache: one bare mirror per repository URL.

The first env at a commit fetches it (one commit, `--depth 1`) into the mirror; every later env
at that commit takes it from the mirror, with no network: a local fetch of that one commit into
a new repository, checked out detached, `origin` set to the real URL and the commit checked.
Which commit a ref names is asked of the repository (`git ls-remote`, one round trip): a moved
tag or an advanced branch is fetched anew. Offline, or when the repository cannot be reached,
the commit the mirror last saw for the ref serves, and the result says so.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.paths import cache_folder
from verl_bootstrap.redact import redact
from verl_bootstrap.source.sourcework import MARK

__all__ = ["CachedCheckout", "GitFailed", "checkout_from_cache", "mirror_dir", "read_at_ref"]

_SHA = re.compile(r"^[0-9a-f]{40}$")
_TIMEOUT_S = 600.0  # one fetch of one commit; an unreachable host fails well before


class GitFailed(Exception):
    """A git command failed; `output` is git's own message (credentials masked)."""

    def __init__(self, output: str) -> None:
        super().__init__(output)
        self.output = output


class _NoSuchRef(GitFailed):
    """The repository answered, and has no tag or branch of that name."""


@dataclass(frozen=True)
class CachedCheckout:
    """The checkout made, the commit it is at, and how the commit was found."""

    commit: str
    fetched: bool  # the mirror had to fetch it (False: taken from the cache alone)
    note: str = ""  # e.g. the repository was unreachable and the cached commit of the ref served


def mirror_dir(url: str) -> Path:
    """The bare mirror of `url` in the user's cache, keyed by a digest of the whole URL: two
    URLs that differ only where redaction masks them (a token in the path or the query) are two
    repositories, and an unreachable one must never be served the other's commit."""
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    return cache_folder("git-mirrors") / f"{key}.git"


def checkout_from_cache(
    url: str, ref: str, dest: Path, env: dict[str, str], *, offline: bool
) -> CachedCheckout:
    """Check `url` at `ref` out into `dest` (which must not exist) through the mirror."""
    mirror = _mirror(url)
    commit, kind, note = _wanted(mirror, url, ref, env, offline=offline)
    fetched = not _has(mirror, commit)
    if fetched:
        if offline and not is_local(url):  # a bundle's verl.git is on this machine: fetch it
            raise GitFailed(f"offline, and the cache has no commit {commit[:12]} of {redact(url)}")
        _fetch_into(mirror, url, commit, f"refs/{kind}/{ref}" if kind else "", env)
    if kind:  # the mirror remembers what the ref named, for an offline run later
        _git(["update-ref", f"refs/{kind}/{ref}", commit], {}, cwd=mirror)
    _clone_local(mirror, dest, url=url, commit=commit, ref=ref, kind=kind, env=env)
    return CachedCheckout(commit=commit, fetched=fetched, note=note)


def read_at_ref(
    url: str, ref: str, names: tuple[str, ...], env: dict[str, str], *, offline: bool
) -> tuple[str, dict[str, str | None]]:
    """The commit `ref` names and the text of each file of `names` there (None: it has none),
    read from the mirror, fetched into it first as a checkout would (which then needs no
    network): what a plan reads of verl before its checkout is made."""
    mirror = _mirror(url)
    commit, kind, _ = _wanted(mirror, url, ref, env, offline=offline)
    if not _has(mirror, commit):
        if offline and not is_local(url):
            raise GitFailed(f"offline, and the cache has no commit {commit[:12]} of {redact(url)}")
        _fetch_into(mirror, url, commit, f"refs/{kind}/{ref}" if kind else "", env)
    if kind:
        _git(["update-ref", f"refs/{kind}/{ref}", commit], {}, cwd=mirror)
    return commit, {name: _show(mirror, commit, name) for name in names}


def _show(mirror: Path, commit: str, name: str) -> str | None:
    try:
        return _git(["show", f"{commit}:{name}"], {}, cwd=mirror, strip=False)
    except GitFailed:  # the commit has no such file
        return None


def is_local(url: str) -> bool:
    """A repository on this machine's filesystem (file:// or a path), reachable offline."""
    return url.startswith("file://") or ("://" not in url and not url.startswith("git@"))


def _mirror(url: str) -> Path:
    mirror = mirror_dir(url)
    if not (mirror / "HEAD").is_file():
        mirror.parent.mkdir(parents=True, exist_ok=True)
        _git(["init", "--quiet", "--bare", str(mirror)], {})
        (mirror / "verl-bootstrap-url").write_text(redact(url) + "\n", encoding="utf-8")
    return mirror


def _wanted(
    mirror: Path, url: str, ref: str, env: dict[str, str], *, offline: bool
) -> tuple[str, str, str]:
    """(the commit `ref` names, "tags"/"heads"/"" for a commit, a note when the cache answered)."""
    if _SHA.match(ref):
        return ref, "", ""
    unreachable = GitFailed(f"offline, and the cache has no commit for {ref}")
    if not offline:
        try:
            return _ls_remote(url, ref, env)
        except _NoSuchRef:
            raise
        except GitFailed as exc:  # git's own words: the caller tells unreachable from the rest
            unreachable = exc
    cached = _cached_ref(mirror, ref)
    if cached is None:
        raise unreachable
    why = "offline" if offline else f"{redact(url)} unreachable"
    return cached[0], cached[1], f"{why}: verl {ref} from the cache at {cached[0][:12]}"


def _ls_remote(url: str, ref: str, env: dict[str, str]) -> tuple[str, str, str]:
    """What the repository says `ref` names; a tag wins over a branch. GitFailed when the
    repository cannot be asked, _NoSuchRef when it has no such ref."""
    done = _git(["ls-remote", "--", url, f"refs/tags/{ref}*", f"refs/heads/{ref}"], env)
    names = {}
    for line in done.splitlines():
        sha, _, name = line.partition("\t")
        names[name.strip()] = sha.strip()
    for name, kind in ((f"refs/tags/{ref}^{{}}", "tags"), (f"refs/tags/{ref}", "tags")):
        if name in names:
            return names[name], kind, ""
    if f"refs/heads/{ref}" in names:
        return names[f"refs/heads/{ref}"], "heads", ""
    raise _NoSuchRef(f"verl ref {ref!r} not found in {redact(url)}")


def _cached_ref(mirror: Path, ref: str) -> tuple[str, str] | None:
    for kind in ("tags", "heads"):
        try:
            name = f"refs/{kind}/{ref}^{{commit}}"
            found = _git(["rev-parse", "--verify", "--quiet", name], {}, cwd=mirror)
        except GitFailed:
            continue
        return found, kind
    return None


def _fetch_into(mirror: Path, url: str, commit: str, name: str, env: dict[str, str]) -> None:
    """One commit into the mirror: by its ref's name (any server serves that), or by its sha."""
    if name:
        _git(["fetch", "--quiet", "--depth", "1", url, f"+{name}:{name}"], env, cwd=mirror)
    else:
        try:
            _git(["fetch", "--quiet", "--depth", "1", url, commit], env, cwd=mirror)
        except GitFailed:  # a server that serves only advertised refs: all of them, in full
            everything = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
            _git(["fetch", "--quiet", url, *everything], env, cwd=mirror)
    if not _has(mirror, commit):
        raise GitFailed(f"{redact(url)} did not serve commit {commit}")


def _has(mirror: Path, commit: str) -> bool:
    try:
        _git(["cat-file", "-e", f"{commit}^{{commit}}"], {}, cwd=mirror)
    except GitFailed:
        return False
    return True


def _clone_local(
    mirror: Path, dest: Path, *, url: str, commit: str, ref: str, kind: str, env: dict[str, str]
) -> None:
    """A new repository at `dest` holding the one commit, checked out, origin the real URL."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    _git(["init", "--quiet", str(dest)], {})
    _link_objects(mirror, dest / ".git")
    _git(["checkout", "--quiet", "--detach", commit], {}, cwd=dest)
    _git(["remote", "add", "origin", url], env, cwd=dest)
    if kind:  # the checkout knows the ref by name, as a clone of it does
        name = f"refs/tags/{ref}" if kind == "tags" else f"refs/remotes/origin/{ref}"
        _git(["update-ref", name, commit], {}, cwd=dest)
    head = _git(["rev-parse", "HEAD"], {}, cwd=dest)
    if head != commit:
        raise GitFailed(f"the checkout is at {head}, not the wanted {commit}")
    (dest / ".git" / MARK).write_text(commit + "\n", encoding="utf-8")


def _link_objects(mirror: Path, git_dir: Path) -> None:
    """The mirror's objects, hard-linked into the new repository (copied across filesystems).

    Faster than a fetch from the mirror, which packs the objects again; git never writes into
    an object file, so the links share nothing that changes. The mirror holds one commit per
    ref without its history, so its list of shallow commits goes along.
    """
    source = mirror / "objects"
    for path in sorted(source.glob("pack/pack-*")) + sorted(source.glob("[0-9a-f][0-9a-f]/*")):
        target = git_dir / "objects" / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:  # another filesystem, or no hard links there
            shutil.copyfile(path, target)
    if (mirror / "shallow").is_file():
        shutil.copyfile(mirror / "shallow", git_dir / "shallow")


def _git(
    args: list[str], env: dict[str, str], *, cwd: Path | None = None, strip: bool = True
) -> str:
    done = proc.capture(
        ["git", *args], env={"GIT_TERMINAL_PROMPT": "0", **env}, cwd=cwd, timeout=_TIMEOUT_S
    )
    if done.returncode != 0:
        raise GitFailed(redact((done.stderr or done.stdout).strip()) or f"git {args[0]} failed")
    return done.stdout.strip() if strip else done.stdout
