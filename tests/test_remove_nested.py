"""`remove` looks at every file of the prefix, not only its top level: a user's file deep inside a
real venv or conda env refuses the removal, names the file, and nothing is deleted. In verl's
checkout, an edit, a new file or a file git ignores (a checkpoint) is the user's work: `remove`
refuses and lists each, `--keep-source` removes the env around it, and a ref switch leaves it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from scaffold import invoke, tool_argv
from test_e2e_cpu import closed_port
from test_lifecycle import DATA
from tinyenv import HOST_XY, tiny_parts
from verlrepo import git, verl_sdist

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED, EXIT_STEP_FAILED
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.run.state.owned import foreign_files
from verl_bootstrap.source.sdist import unpack_sdist
from verl_bootstrap.source.sourcework import checkout_work

SITE = f"lib/python{HOST_XY}/site-packages"


def files_of(prefix: Path) -> list[str]:
    return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))


def write(*paths: Path) -> list[Path]:
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine\n", encoding="utf-8")
    return list(paths)


def refuses_then_removes(prefix: Path, mine: list[Path]) -> None:
    """`mine` (the user's files) refuse the removal, named; without them the env goes."""
    before = files_of(prefix)
    refused = invoke(["remove", "--prefix", str(prefix), "--yes", "--json"])
    assert refused.code == EXIT_REFUSED, refused.err
    names = [str(p.relative_to(prefix)) for p in sorted(mine)]
    assert refused.json()["error"]["data"] == {"foreign": names, "work": [], "deleted": False}
    assert files_of(prefix) == before
    for path in mine:
        path.unlink()
    removed = invoke(["remove", "--prefix", str(prefix), "--yes"])
    assert removed.code == EXIT_OK, removed.err
    assert not prefix.exists()


def test_a_users_file_deep_in_a_venv_refuses_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = tiny_parts(tmp_path, monkeypatch)
    prefix = tmp_path / "env"
    made = invoke(
        [
            "--profile",
            str(parts.profile),
            "--prefix",
            str(prefix),
            "--verl-source",
            str(parts.repo),
            "--cuda",
            "cpu",
        ]
    )
    assert made.code == EXIT_OK, made.err
    assert foreign_files(prefix) == []  # everything a real install leaves is known
    link = prefix / "bin" / "my-link"
    link.symlink_to("/etc/hostname")  # listed as the user's, not followed
    mine = write(
        prefix / SITE / "mynotes.txt",
        prefix / SITE / "vbtiny" / "scratch.py",
        prefix / "src" / "notes" / "run.sh",
    )  # beside verl's checkout
    refuses_then_removes(prefix, [link, *mine])
    assert Path("/etc/hostname").exists()


def test_a_users_file_deep_in_a_conda_env_refuses_remove(
    tmp_path: Path, python_channel: Path
) -> None:
    prefix = tmp_path / "conda-env"
    away = f"http://127.0.0.1:{closed_port()}/verl.git"  # fetch-source fails; the env is made
    invoke(
        [
            "--profile",
            str(DATA / "light" / "light.yaml"),
            "--prefix",
            str(prefix),
            "--backend",
            "conda",
            "--channel",
            str(python_channel),
            "--verl-source",
            away,
            "--verl-ref",
            "main",
            "--allow-unsupported-ref",
        ]
    )
    assert (prefix / "conda-meta").is_dir()
    assert foreign_files(prefix) == []
    mine = write(prefix / "lib" / f"python{HOST_XY}" / "my_module.py", prefix / "bin" / "run.sh")
    refuses_then_removes(prefix, mine)


# --- verl's checkout: the user's work in it is never deleted or moved ---------------------------


def tiny_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A real tiny env, verl from the stand-in's git repo; (prefix, verl's repo)."""
    parts = tiny_parts(tmp_path, monkeypatch)
    prefix = tmp_path / "env"
    made = invoke(
        [
            "--profile",
            str(parts.profile),
            "--prefix",
            str(prefix),
            "--verl-source",
            str(parts.repo),
            "--cuda",
            "cpu",
        ]
    )
    assert made.code == EXIT_OK, made.err
    return prefix, parts.repo


def work_in(checkout: Path) -> dict[Path, str]:
    """An edit, a new file and a checkpoint where runs write (git ignores it): the user's work."""
    edited = checkout / ("verl/__init__.py" if (checkout / ".git").exists() else PPO)
    files = {
        edited: edited.read_text(encoding="utf-8") + "# my change\n",
        checkout / "my_experiment.py": "print('mine')\n",
        checkout / "checkpoints" / "x.pt": "weights\n",
    }
    if (checkout / ".git").exists():  # verl's own .gitignore covers checkpoints/: the same here
        (checkout / ".git" / "info" / "exclude").write_text("checkpoints/\n", encoding="utf-8")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return files


PPO = "verl/trainer/main_ppo.py"


def refused_then_kept(prefix: Path, work: dict[Path, str], listed: list[str]) -> None:
    """`remove` refuses, naming each file of the user's work; --keep-source removes the env and
    leaves the checkout with that work as it was."""
    before = files_of(prefix)
    refused = invoke(["remove", "--prefix", str(prefix), "--yes", "--json"])
    assert refused.code == EXIT_REFUSED, refused.err
    error = refused.json()["error"]
    assert error["data"] == {"foreign": [], "work": listed, "deleted": False}
    assert "--keep-source" in error["hint"]
    assert files_of(prefix) == before
    kept = invoke(["remove", "--prefix", str(prefix), "--yes", "--keep-source"])
    assert kept.code == EXIT_OK, kept.err
    checkout = prefix / "src" / "verl"
    assert sorted(p.name for p in prefix.iterdir()) == ["src"]
    assert [p.name for p in (prefix / "src").iterdir()] == ["verl"]
    assert {p: p.read_text(encoding="utf-8") for p in work} == work
    assert (checkout / "pyproject.toml").is_file()


def test_remove_refuses_an_edit_a_new_file_and_an_ignored_checkpoint_in_a_git_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix, _repo = tiny_env(tmp_path, monkeypatch)
    work = work_in(prefix / "src" / "verl")
    listed = [
        "checkpoints/x.pt (ignored by git)",
        "my_experiment.py (untracked)",
        "verl/__init__.py (modified)",
    ]
    refused_then_kept(prefix, work, listed)


def test_remove_refuses_unpushed_commits_a_stash_and_local_branches_listing_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What git keeps beyond the files is work too (on main, `remove` deleted it): a commit on
    no remote branch, a stash entry and a local branch, all named in one message with the files;
    --keep-source keeps every one; a clean checkout the tool made still goes with its env."""
    prefix, _repo = tiny_env(tmp_path, monkeypatch)
    checkout = prefix / "src" / "verl"
    assert checkout_work(checkout) == []  # the checkout as the tool made it: no work
    git(checkout, "branch", "experiment")  # a local branch at the tool's commit
    (checkout / "notes.py").write_text("x = 1\n", encoding="utf-8")
    git(checkout, "add", "notes.py")
    git(checkout, "stash", "push", "-q", "-m", "half done")
    git(checkout, "commit", "-q", "--allow-empty", "-m", "my fix")  # on the detached HEAD
    mine = git(checkout, "rev-parse", "HEAD")[:12]  # the tool names commits by 12 digits
    history = [
        "branch experiment (a local branch)",
        "stash@{0} (stashed: On (no branch): half done)",
        f"commit {mine} (on no remote branch: my fix)",
    ]
    alone = invoke(["remove", "--prefix", str(prefix), "--yes", "--json"])  # no file of the user's
    assert alone.code == EXIT_REFUSED, alone.err
    assert alone.json()["error"]["data"] == {"foreign": [], "work": history, "deleted": False}
    work = work_in(checkout)
    listed = [
        "branch experiment (a local branch)",
        "stash@{0} (stashed: On (no branch): half done)",
        f"commit {mine} (on no remote branch: my fix)",
        "checkpoints/x.pt (ignored by git)",
        "my_experiment.py (untracked)",
        "verl/__init__.py (modified)",
    ]
    refused_then_kept(prefix, work, listed)
    assert git(checkout, "rev-parse", "HEAD")[:12] == mine
    assert git(checkout, "stash", "list", "--format=%s") == "On (no branch): half done"
    assert git(checkout, "branch", "--list", "experiment").strip() == "experiment"


def test_remove_refuses_an_edit_a_new_file_and_a_checkpoint_in_an_unpacked_sdist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl from its release sdist (no .git): the files are the tool's only while they are the
    sdist's, with the sha256 recorded when it was unpacked."""
    prefix, _repo = tiny_env(tmp_path, monkeypatch)
    checkout = prefix / "src" / "verl"
    shutil.rmtree(checkout)
    archive = verl_sdist()
    unpack_sdist(archive, checkout, file_sha256(archive))  # what the sdist fallback does
    (checkout / "verl.egg-info" / "PKG-INFO").write_text("rebuilt\n")  # an editable build's own
    work = work_in(checkout)
    listed = [
        "checkpoints/x.pt (not in the sdist)",
        "my_experiment.py (not in the sdist)",
        f"{PPO} (modified)",
    ]
    refused_then_kept(prefix, work, listed)


def test_a_clean_sdist_checkout_goes_with_its_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix, _repo = tiny_env(tmp_path, monkeypatch)
    checkout = prefix / "src" / "verl"
    shutil.rmtree(checkout)
    archive = verl_sdist()
    unpack_sdist(archive, checkout, file_sha256(archive))
    removed = invoke(["remove", "--prefix", str(prefix), "--yes"])
    assert removed.code == EXIT_OK, removed.err
    assert not prefix.exists()


def test_a_checkout_holding_ignored_work_is_not_moved_to_another_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix, repo = tiny_env(tmp_path, monkeypatch)
    git(repo, "commit", "-q", "--allow-empty", "-m", "next")
    git(repo, "tag", "v0.9.2")
    checkout = prefix / "src" / "verl"
    head = git(checkout, "rev-parse", "HEAD")
    (checkout / ".git" / "info" / "exclude").write_text("checkpoints/\n", encoding="utf-8")
    (checkout / "checkpoints").mkdir()
    (checkout / "checkpoints" / "x.pt").write_text("weights\n", encoding="utf-8")
    moved = invoke(
        [
            "--profile",
            str(tmp_path / "tiny.yaml"),
            "--prefix",
            str(prefix),
            "--verl-source",
            str(repo),
            "--verl-ref",
            "v0.9.2",
            "--cuda",
            "cpu",
            "--yes",
            "--allow-unsupported-ref",
        ]
    )
    assert moved.code == EXIT_STEP_FAILED, moved.err  # the fetch-source step stops the run
    assert "holds work of yours (checkpoints/x.pt (ignored by git))" in moved.err
    assert git(checkout, "rev-parse", "HEAD") == head
    assert (checkout / "checkpoints" / "x.pt").read_text(encoding="utf-8") == "weights\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder root cannot read needs another user")
def test_a_folder_remove_cannot_read_refuses_it_naming_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env's owner is `nobody` (uid 65534, entered with setpriv), one of whose folders it
    cannot read: remove says which, exits 3, and deletes nothing."""
    base = Path(tempfile.mkdtemp(prefix="vb-remove-", dir="/tmp"))  # reachable by nobody
    try:
        base.chmod(0o755)
        prefix, _repo = tiny_env(base, monkeypatch)
        subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
        closed = prefix / SITE / "vbtiny"
        closed.chmod(0)
        before = files_of(prefix)
        home = base / "home"
        done = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                *tool_argv("remove", "--prefix", prefix, "--yes", "--json"),
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=base,
            timeout=120,
            env={
                **os.environ,
                "HOME": str(home),
                "VERL_BOOTSTRAP_HOME": str(home / ".vb"),
                "PYTHONDONTWRITEBYTECODE": "1",
            },
        )
        assert done.returncode == EXIT_REFUSED, done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["data"] == {"unreadable": str(closed), "deleted": False}
        assert "crash" not in done.stderr
        closed.chmod(0o755)
        assert files_of(prefix) == before
    finally:
        shutil.rmtree(base)


def test_one_refusal_names_the_users_files_of_every_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name at the top, a file deep inside and work in the checkout: all said at once, so
    moving them out takes one try, not three."""
    prefix, _repo = tiny_env(tmp_path, monkeypatch)
    top = write(prefix / "my-notes.txt")[0]
    deep = write(prefix / SITE / "mynotes.txt")[0]
    work = work_in(prefix / "src" / "verl")
    refused = invoke(["remove", "--prefix", str(prefix), "--yes", "--json"])
    assert refused.code == EXIT_REFUSED, refused.err
    error = refused.json()["error"]
    assert error["data"]["foreign"] == ["my-notes.txt", f"{SITE}/mynotes.txt"]
    assert error["data"]["work"][:2] == [
        "checkpoints/x.pt (ignored by git)",
        "my_experiment.py (untracked)",
    ]
    said = error["hint"]  # one hint for both kinds
    assert "move them out of the prefix first" in said and "--keep-source" in said
    for path in (top, deep):
        path.unlink()
    kept = invoke(["remove", "--prefix", str(prefix), "--yes", "--keep-source"])
    assert kept.code == EXIT_OK, kept.err
    assert {p: p.read_text(encoding="utf-8") for p in work} == work
