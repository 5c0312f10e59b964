"""An env is yours, tried as a hostile second user for real: the lab mate is `nobody` (uid 65534,
entered with setpriv; the tests run as root, as CI does), the victim is the test's own user.

Each attack: a /tmp prefix the victim's list of envs names, purged and made again by the lab mate
with a python, a conda activation hook and a state file of hers (`run NAME` ran them); a state
file of hers naming her program as the recorded `--python` (`plan --prefix` ran it); a folder
whose POSIX ACL lets her write (its mode's group bits are then the ACL's mask, and it passed for
private); `verify --train --train-dir` in a folder she can write, with a link planted at the log's
name (the log was truncated and appended through); a checkpoint she could write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labmate import (
    NOBODY,
    THEIRS,
    as_nobody,
    clear_acl,
    need_two_users,
    nobody_can_write_in,
    plant_env,
    set_acl,
    sticky_folder,
)
from scaffold import invoke, run_tool, with_env
from tinyenv import tiny_parts

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED, EXIT_STEP_FAILED, Refused
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.paths import cache_folder, private_folder
from verl_bootstrap.run.state.envindex import register
from verl_bootstrap.verify.trainscratch import not_loadable


@pytest.fixture(autouse=True)
def _two_real_users() -> None:
    need_two_users()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A sticky folder everyone may write, as /tmp and /scratch are."""
    with sticky_folder() as path:
        yield path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The victim's tool home (its list of envs), in this process and the tool's."""
    home = tmp_path / "home"
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(home))
    monkeypatch.delenv("VERL_BOOTSTRAP_PREFIX", raising=False)
    return home


def tool(*argv: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The tool as the victim runs it, with this process's tool home."""
    return run_tool(*argv, env=with_env(PYTHONDONTWRITEBYTECODE="1"), cwd=None, timeout=timeout)


def refused_as_theirs(*argv: str | Path) -> dict[str, Any]:
    """`ARGV --json` refused (exit 3): its error's data, the refusal's facts."""
    done = tool(*argv, "--json")
    assert done.returncode == EXIT_REFUSED, (argv, done.stdout + done.stderr)
    error = json.loads(done.stdout)["error"]
    assert error["kind"] == "Refused", error
    data: dict[str, Any] = error["data"]
    return data


def test_run_refuses_an_env_another_user_made_again_at_a_purged_prefix(
    shared: Path, home: Path, tmp_path: Path
) -> None:
    """On main `run rl -- python` sourced her hook and ran her python as the victim."""
    prefix, marker = shared / "rl", tmp_path / "ran-as-victim"
    register(prefix)  # the victim's env, since purged with the rest of /tmp
    plant_env(prefix, marker)
    done = tool("run", "rl", "--", "python", "-c", "pass")
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    assert f"run: the env at {prefix} is not yours: {prefix} {THEIRS}" in done.stderr
    assert "another user made that folder" in done.stderr
    assert not marker.exists()
    activate = tool("activate", "rl")  # prints a script, so it has no --json
    assert activate.returncode == EXIT_REFUSED, activate.stderr
    assert f"the env at {prefix} is not yours: {prefix} {THEIRS}" in activate.stderr
    theirs = {"prefix": str(prefix), "part": str(prefix), "theirs": True, "why": THEIRS}
    for argv in (["info", "rl"], ["verify", "rl"], ["remove", "rl", "--yes"]):
        assert refused_as_theirs(*argv) == theirs, argv
    assert not marker.exists() and (prefix / "bin" / "python").exists()  # nothing of hers gone


def test_envs_list_says_such_an_env_is_not_yours_and_prune_forgets_it(
    shared: Path, home: Path, tmp_path: Path
) -> None:
    """On main `envs list` read her state file and showed her env as the victim's."""
    prefix = shared / "rl"
    register(prefix)
    plant_env(prefix, tmp_path / "ran-as-victim")
    listed = tool("envs", "list", "--no-size")
    assert listed.returncode == EXIT_OK, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("rl "))
    assert row.split()[2:4] == ["not", "yours"], listed.stdout
    assert f"not yours: {prefix} {THEIRS} (nothing in it is run or read)" in listed.stdout
    (entry,) = json.loads(tool("envs", "list", "--no-size", "--json").stdout)["envs"]
    assert entry["status"] == "not yours" and entry["not_yours"] == f"{prefix} {THEIRS}"
    pruned = tool("envs", "prune")
    assert f"forgot {prefix} (its folder is another user's now)" in pruned.stdout
    assert json.loads(tool("envs", "list", "--json").stdout)["envs"] == []


def test_a_state_file_of_another_user_never_names_the_program_plan_runs(
    shared: Path, home: Path, tmp_path: Path
) -> None:
    """Her state file records `python: her program`; on main `plan --prefix P` ran it as the
    victim (to ask its version) before it planned."""
    prefix, marker = shared / "rl", tmp_path / "ran-as-victim"
    program = shared / "her-python"
    record = {"version": 1, "record": {"options": {"python": str(program)}}}
    script = f"""
        printf '#!/bin/sh\\necho ran >> {marker}\\nexec python3 "$@"\\n' > {program}
        chmod 755 {program}
        mkdir -p {prefix}/.verl-bootstrap
        printf '%s\\n' '{json.dumps(record)}' > {prefix}/.verl-bootstrap/state.json
    """
    assert as_nobody(script).returncode == 0
    data = refused_as_theirs("plan", "--prefix", prefix, "--profile", "cpu")
    assert (data["part"], data["theirs"]) == (str(prefix), True)
    assert not marker.exists()


def test_plan_refuses_a_prefix_folder_another_user_made_first(shared: Path, home: Path) -> None:
    """An empty folder of hers, where the victim's install would put its env (and its python,
    which she could then replace): refused, naming her; on main it was planned into."""
    prefix = shared / "rl"
    assert as_nobody(f"mkdir {prefix}").returncode == 0
    data = refused_as_theirs("plan", "--prefix", prefix, "--profile", "cpu")
    assert (data["part"], data["theirs"], data["why"]) == (str(prefix), True, THEIRS)


def test_a_list_of_envs_another_user_wrote_is_not_read(home: Path) -> None:
    home.mkdir()
    (home / "envs.json").write_text(json.dumps({"prefixes": ["/tmp/theirs"]}))
    os.chown(home / "envs.json", NOBODY, NOBODY)
    data = refused_as_theirs("envs", "list", "--no-size")
    listed = str(home / "envs.json")
    assert data == {"path": listed, "part": listed, "why": THEIRS}


# --- ACLs: a folder whose ACL lets another user write is not private ----------------------------


@pytest.mark.parametrize("grant", ["u:nobody:rwx", "g:nogroup:rwx"])
def test_a_folder_whose_acl_lets_another_user_write_is_not_private(
    shared: Path, grant: str
) -> None:
    """On main the ACL's mask in the group bits (0770 of root's own group) passed for private."""
    folder = shared / "cache"
    folder.mkdir(mode=0o700)
    assert private_folder(folder) is None and not nobody_can_write_in(folder)
    set_acl(folder, grant)
    assert folder.stat().st_mode & 0o777 == 0o770  # what the mode shows: the mask
    assert nobody_can_write_in(folder)  # the ACL is real: the kernel lets her write
    who = "user nobody (65534)" if grant.startswith("u") else "group nogroup (65534)"
    assert private_folder(folder) == f"{folder} is writable by others (its ACL lets {who} write)"
    with pytest.raises(Refused, match=r"is not private: .*\(its ACL lets"):
        cache_folder("sdists", environ={"VERL_BOOTSTRAP_CACHE": str(folder)})


def test_an_acl_whose_mask_withholds_write_leaves_the_folder_private(shared: Path) -> None:
    """The mask counts: an entry granting write under a mask without it lets no one write."""
    folder = shared / "cache"
    folder.mkdir(mode=0o700)
    set_acl(folder, "u:nobody:rwx", "m::r-x")
    assert not nobody_can_write_in(folder)
    assert private_folder(folder) is None


def _venv(prefix: Path) -> Path:
    """A real venv with a state folder: an env of the victim's, as `envs list` finds one."""
    subprocess.run([uv_binary(), "venv", "-q", "--python", "python3", str(prefix)], check=True)
    (prefix / ".verl-bootstrap").mkdir()
    return prefix


def test_run_refuses_an_env_of_ones_own_whose_bin_folder_an_acl_lets_another_write(
    shared: Path, home: Path
) -> None:
    """She could put a `python` of hers in the env's bin/ (the run's PATH starts there); on main
    the env ran."""
    prefix = _venv(shared / "rl")  # where she reaches the folder the ACL opens to her
    register(prefix)
    set_acl(prefix / "bin", "u:nobody:rwx")
    assert nobody_can_write_in(prefix / "bin")
    done = tool("run", "rl", "--", "python", "-c", "pass")
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    assert (
        f"the env at {prefix} is not yours: {prefix / 'bin'} is writable by others "
        "(its ACL lets user nobody (65534) write)" in done.stderr
    )
    clear_acl(prefix / "bin", 0o755)
    assert tool("run", "rl", "--", "python", "-c", "pass").returncode == EXIT_OK


# --- the training step's scratch folder ----------------------------------------------------------


def test_a_checkpoint_another_user_could_write_is_never_loaded(
    shared: Path, tmp_path: Path
) -> None:
    """verl loads it on resume with torch.load(weights_only=False): a pickle."""
    ckpt = tmp_path / "checkpoints"
    (ckpt / "global_step_1").mkdir(parents=True)
    weights = ckpt / "global_step_1" / "model.pt"
    weights.write_bytes(b"weights")
    assert not_loadable(ckpt) is None
    os.chown(weights, NOBODY, NOBODY)
    assert not_loadable(ckpt) == f"{weights} is another user's (uid 65534)"
    os.chown(weights, 0, 0)
    set_acl(weights, "u:nobody:rw-")
    assert not_loadable(ckpt) == (
        f"{weights} is writable by others (its ACL lets user nobody (65534) write)"
    )
    weights.unlink()
    hers = shared / "model.pt"
    assert as_nobody(f"echo pickle > {hers}").returncode == 0
    weights.symlink_to(hers)
    assert not_loadable(ckpt) == f"{weights} leads to {hers}, which is another user's (uid 65534)"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real tiny env of the victim's (tests/tinyenv.py: a stand-in verl, one tiny stage), which
    `verify` passes: `verify --train` gets as far as its training step."""
    root = tmp_path_factory.mktemp("tiny")
    with pytest.MonkeyPatch.context() as patch:
        parts = tiny_parts(root, patch)
        argv = ["--profile", str(parts.profile), "--prefix", str(root / "env")]
        made = invoke([*argv, "--verl-source", str(parts.repo), "--cuda", "cpu"])
        assert made.code == EXIT_OK, made.err
        yield root / "env"


def train(prefix: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    return tool("verify", "--prefix", prefix, "--train", "sft", "--train-dir", folder, timeout=300)


@pytest.mark.parametrize("made_by", ["her", "the victim, mode 0777"])
def test_verify_train_refuses_a_train_dir_she_can_write_and_writes_nothing_through_her_link(
    tiny: Path, shared: Path, tmp_path: Path, made_by: str
) -> None:
    """On main the victim's file at the end of her link was truncated, then appended the log."""
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    folder = shared / "train"
    if made_by == "her":
        assert as_nobody(f"mkdir -m 777 {folder}").returncode == 0
    else:
        folder.mkdir()
        folder.chmod(0o777)
    assert as_nobody(f"ln -s {precious} {folder}/train-sft.log").returncode == 0
    done = train(tiny, folder)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    why = "belongs to another user (uid 65534)" if made_by == "her" else "writable by others"
    assert f"--train-dir {folder} is not private: {folder} " in done.stderr
    assert why in done.stderr
    assert precious.read_text() == "mine\n"


def test_verify_train_makes_its_folder_private_and_replaces_a_link_at_the_logs_name(
    tiny: Path, shared: Path, tmp_path: Path
) -> None:
    """A folder the tool makes (0700 each, as a cache's); a link left at the log's name in it is
    replaced, never written through (on main the file it led to was truncated)."""
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    folder = shared / "new" / "train"
    made = train(tiny, folder)  # the stand-in verl has no CPU hooks: its step is skipped
    assert made.returncode == EXIT_STEP_FAILED, made.stderr
    assert "sft step: verl 0.9.1 has no external-module hook" in made.stdout
    for each in (folder.parent, folder):
        assert each.stat().st_mode & 0o777 == 0o700, each
    log = folder / "train-sft.log"
    log.unlink()
    log.symlink_to(precious)
    again = train(tiny, folder)
    assert again.returncode == made.returncode, again.stderr
    assert precious.read_text() == "mine\n"
    assert not log.is_symlink() and log.read_text().startswith("$ ")


def test_verify_train_refuses_the_envs_own_train_folder_when_others_can_write_it(
    tiny: Path,
) -> None:
    """Without --train-dir the step's folder is the env's .verl-bootstrap/train/: made 0700, and
    refused when others can write it (on main it was used as it was)."""
    own = tiny / ".verl-bootstrap" / "train"
    shutil.rmtree(own, ignore_errors=True)
    own.mkdir()
    own.chmod(0o777)
    done = tool("verify", "--prefix", tiny, "--train", "sft")
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    assert f"the training step's folder {own} is another user's or writable by others" in (
        done.stderr
    )
    own.rmdir()
    again = tool("verify", "--prefix", tiny, "--train", "sft")
    assert again.returncode == EXIT_STEP_FAILED, again.stderr  # the stand-in's step: skipped
    assert own.stat().st_mode & 0o777 == 0o700
