"""The bundle's two non-index parts: verl's locked git commit, and the tool itself.

verl's checkout travels as a git bundle of one branch at the locked commit, so the env's checkout
on the node has the very commit the lock names. The tool travels as its own wheel plus its
dependency wheels (uv among them) for the lock's Python and platform, so a node with only a Python
can run it.
"""

from __future__ import annotations

from pathlib import Path

import verl_bootstrap
from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, Refused
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.resolve import Target, load_toml
from verl_bootstrap.lock.bundle.collect import Collected, resolve_download
from verl_bootstrap.lock.bundle.selfwheel import installed_requirements, repack_installed
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.platforms import locked_glibc

__all__ = ["LOCKED_BRANCH", "build_tool_wheel", "tool_wheels", "verl_git_bundle", "verl_pyproject"]

LOCKED_BRANCH = "verl-bootstrap-locked"  # the one branch of the git bundle, at the locked commit
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0"}  # a credential prompt would hang a batch run


def verl_git_bundle(repo: str, commit: str, dest: Path, *, work: Path) -> Path:
    """A git bundle of `repo` holding `commit` on one branch (the repo itself is not changed)."""
    clone, log = work / "verl.git", work / "verl-source.log"
    try:
        proc.run(
            ["git", "clone", "--bare", "--quiet", repo, str(clone)], log_path=log, env=_GIT_ENV
        )
        proc.run(["git", "-C", str(clone), "branch", "-f", LOCKED_BRANCH, commit], log_path=log)
        proc.run(
            ["git", "-C", str(clone), "bundle", "create", str(dest), LOCKED_BRANCH], log_path=log
        )
    except CommandFailed as exc:
        raise Refused(
            f"verl's locked commit {commit} could not be taken from {repo}: {exc.message}",
            hint="pass --verl-source with a clone that has the locked commit",
        ) from None
    return dest


def verl_pyproject(repo_git: Path, commit: str, *, work: Path) -> bytes | None:
    """verl's pyproject.toml at the locked commit, from the bare clone `verl_git_bundle` made."""
    try:
        done = proc.run(
            ["git", "-C", str(repo_git), "show", f"{commit}:pyproject.toml"],
            log_path=work / "verl-source.log",
            keep_output=True,
        )
    except CommandFailed:
        return None
    return done.output.encode()


def build_tool_wheel(out: Path) -> Path:
    """verl-bootstrap's own wheel in the folder `out` (the caller's own: the build writes its
    log there): built from its source tree when it runs from one, else packed again from its
    installed files (pip, pipx, `uv tool install`)."""
    out.mkdir(parents=True, exist_ok=True)
    root = _source_tree()
    if root is None:
        return repack_installed(out)
    proc.run(
        [uv_binary(), "build", "--wheel", "--quiet", "--out-dir", str(out), str(root)],
        log_path=out / "build.log",
    )
    (wheel,) = out.glob("verl_bootstrap-*.whl")
    return wheel


def _source_tree() -> Path | None:
    """The checkout the running verl-bootstrap is imported from (an editable install too)."""
    root = Path(verl_bootstrap.__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def _requirements(root: Path | None) -> list[str]:
    if root is None:
        return installed_requirements()
    project = load_toml((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return list(project["dependencies"])


def tool_wheels(
    lock: Lockfile, settings: IndexSettings, *, cache: Path, work: Path
) -> list[Collected]:
    """verl-bootstrap's own wheel (however it was installed) and its dependencies' wheels."""
    wheel = build_tool_wheel(work / "tool-wheel")
    glibc = locked_glibc(lock.cuda.virtual_packages)
    target = Target(lock.python, lock.platform, "", False, glibc)
    deps = resolve_download(
        _requirements(_source_tree()), target, settings, cache=cache, work=work / "tool-deps"
    )
    own = Collected(path=wheel, name="verl-bootstrap", sha256=file_sha256(wheel))
    return [own, *deps]
