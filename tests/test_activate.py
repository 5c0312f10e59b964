"""Activation in real shells (bash, sh, zsh, fish): enter the env, keep foreign CUDA libraries off
LD_LIBRARY_PATH, and `deactivate` back to exactly the shell's previous environment. No conda."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from shells import shell_path

from verl_bootstrap import cli
from verl_bootstrap.installer.envs.activation import (
    activation_line,
    activation_script,
    write_activation,
)
from verl_bootstrap.lab.onboard import rc_file, write_rc_block

POSIX_SHELLS = ["bash", "sh", "zsh"]


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    """An env (with its own libcudnn), a system cuDNN folder, and an unrelated library folder."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    own = prefix / "lib" / "python3.11" / "site-packages" / "nvidia" / "cudnn" / "lib"
    own.mkdir(parents=True)
    (own / "libcudnn.so.9").write_bytes(b"")
    foreign = tmp_path / "usr-local-cuda" / "lib64"
    foreign.mkdir(parents=True)
    (foreign / "libcudnn.so.8").write_bytes(b"")
    other = tmp_path / "opt" / "lib"
    other.mkdir(parents=True)
    (other / "libfoo.so").write_bytes(b"")
    return {"prefix": prefix, "own": own, "foreign": foreign, "other": other}


def _posix(shell: str, script: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [shell_path(shell), "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _environ(library_path: str) -> dict[str, str]:
    """A plain user's environment (no shims on PATH that could shadow `deactivate`)."""
    keep = ("HOME", "LANG", "TERM")
    base = {k: os.environ[k] for k in keep if k in os.environ}
    return {**base, "PATH": "/usr/local/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": library_path}


SNAPSHOT = "env | grep -v -e '^_=' -e '^SHLVL=' -e '^PWD=' -e '^OLDPWD=' | sort"


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_enter_and_leave_restore_the_shell_exactly(shell: str, dirs: dict[str, Path]) -> None:
    prefix = dirs["prefix"]
    script = write_activation(prefix)
    library = ":".join(str(dirs[k]) for k in ("foreign", "other", "own"))
    out = _posix(
        shell,
        f"{SNAPSHOT} > before; . {script}; "
        'echo "PATH=$PATH"; echo "LD=$LD_LIBRARY_PATH"; echo "VENV=$VIRTUAL_ENV"; '
        f'echo "PY=$(command -v python)"; deactivate; {SNAPSHOT} > after; '
        "cmp before after && echo RESTORED; command -v deactivate || echo GONE",
        {**_environ(library), "HOME": str(prefix.parent)},
        prefix.parent,
    )
    lines = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert lines["PATH"].startswith(f"{prefix / 'bin'}:")
    assert lines["LD"] == f"{dirs['other']}:{dirs['own']}"  # the foreign cuDNN folder is dropped
    assert lines["VENV"] == str(prefix)
    assert lines["PY"] == str(prefix / "bin" / "python")
    assert "RESTORED" in out and "GONE" in out


def test_the_written_file_cleans_the_library_path_of_the_moment(dirs: dict[str, Path]) -> None:
    script = write_activation(dirs["prefix"])  # written while LD_LIBRARY_PATH was something else
    out = _posix(
        "bash",
        f'. {script}; echo "${{LD_LIBRARY_PATH-UNSET}}"',
        _environ(str(dirs["foreign"])),
        dirs["prefix"].parent,
    )
    assert out.strip() == "UNSET"


def test_fish_enters_and_leaves(dirs: dict[str, Path]) -> None:
    prefix = dirs["prefix"]
    write_activation(prefix)
    fish_file = prefix / ".verl-bootstrap" / "activate.fish"
    library = f"{dirs['foreign']}:{dirs['other']}"
    done = subprocess.run(
        [
            shell_path("fish"),
            "--no-config",
            "-c",
            f"{SNAPSHOT} > before; source {fish_file}; echo LD=$LD_LIBRARY_PATH; "
            f"echo VENV=$VIRTUAL_ENV; echo BIN=$PATH[1]; deactivate; {SNAPSHOT} > after; "
            "cmp before after; and echo RESTORED",
        ],
        env={**_environ(library), "HOME": str(prefix.parent)},
        cwd=prefix.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"LD={dirs['other']}" in done.stdout
    assert f"VENV={prefix}" in done.stdout and f"BIN={prefix / 'bin'}" in done.stdout
    assert "RESTORED" in done.stdout


def test_a_conda_prefix_gets_conda_variables_hooks_and_cuda_home(
    dirs: dict[str, Path], tmp_path: Path
) -> None:
    prefix = dirs["prefix"]
    (prefix / "conda-meta").mkdir()
    (prefix / "bin" / "nvcc").write_text("#!/bin/sh\n")
    for kind, line in (("activate", "export HOOKED=1"), ("deactivate", "unset HOOKED")):
        hooks = prefix / "etc" / "conda" / f"{kind}.d"
        hooks.mkdir(parents=True)
        (hooks / "x.sh").write_text(line + "\n")
    script = write_activation(prefix)
    out = _posix(
        "bash",
        f"cd {tmp_path}; {SNAPSHOT} > before; . {script}; "
        'echo "$CONDA_PREFIX|$CONDA_DEFAULT_ENV|$CUDA_HOME|${VIRTUAL_ENV-none}|$HOOKED"; '
        f". {script}; deactivate; {SNAPSHOT} > after; cmp before after && echo RESTORED",
        _environ(""),
        tmp_path,
    )
    assert f"{prefix}|env|{prefix}|none|1" in out
    assert "RESTORED" in out  # activating twice, then one deactivate, restores everything


def test_the_cli_prints_what_eval_enters(
    dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["activate", "--prefix", str(dirs["prefix"]), "--shell", "bash"]) == 0
    code = capsys.readouterr().out
    assert code.strip() == activation_script(dirs["prefix"], "bash").strip()
    done = subprocess.run(
        ["bash", "-c", 'eval "$1"; echo "$VIRTUAL_ENV"', "bash", code],
        capture_output=True,
        text=True,
        check=False,
        env=_environ(""),
    )
    assert done.stdout.strip() == str(dirs["prefix"])
    assert cli.main(["activate", "--prefix", str(dirs["prefix"]), "--shell", "fish"]) == 0
    assert "set -gx VIRTUAL_ENV" in capsys.readouterr().out
    assert cli.main(["activate", "--prefix", str(dirs["prefix"] / "nope")]) == 2


def test_the_rc_block_is_written_once_and_replaced_in_place(tmp_path: Path) -> None:
    rc = rc_file("bash", {}, tmp_path)
    rc.write_text("alias ll='ls -l'\n")
    activation = tmp_path / ".verl-bootstrap" / "activate"
    assert write_rc_block(rc, "bash", activation) is True
    assert write_rc_block(rc, "bash", activation) is False
    write_rc_block(rc, "bash", tmp_path / "elsewhere")
    text = rc.read_text()
    assert text.startswith("alias ll='ls -l'\n")
    assert text.count("# >>> verl-bootstrap >>>") == 1 and "elsewhere" in text
    assert rc_file("fish", {}, tmp_path) == tmp_path / ".config" / "fish" / "config.fish"
    assert rc_file("zsh", {"ZDOTDIR": "/z"}, tmp_path) == Path("/z/.zshrc")


def test_activation_line_names_the_written_file(tmp_path: Path) -> None:
    assert activation_line(tmp_path) == f". {tmp_path / '.verl-bootstrap' / 'activate'}"
    assert activation_line(tmp_path, "fish").startswith("source ")


@pytest.fixture
def outer(tmp_path: Path) -> Path:
    """A real venv (python -m venv) the user is inside when entering the verl env."""
    venv = tmp_path / "outer"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_leaving_the_env_entered_from_a_venv_gives_the_venv_back(
    shell: str, dirs: dict[str, Path], outer: Path
) -> None:
    prefix = dirs["prefix"]
    script = write_activation(prefix)
    out = _posix(
        shell,
        # a prompt set (venv's deactivate leaves an empty one changed, with or without us)
        f"export PS1='$ '; {SNAPSHOT} > before; . {outer}/bin/activate; . {script}; "
        "echo IN=$VIRTUAL_ENV; "
        'deactivate; echo BACK=$VIRTUAL_ENV; echo "PY=$(command -v python)"; '
        f"deactivate; {SNAPSHOT} > after; cmp before after && echo RESTORED",
        {**_environ(""), "HOME": str(prefix.parent)},
        prefix.parent,
    )
    assert f"IN={prefix}" in out
    assert f"BACK={outer}" in out and f"PY={outer / 'bin' / 'python'}" in out
    assert "RESTORED" in out  # the venv's own deactivate ran, and left the shell as it was


def test_fish_gives_the_outer_venv_back_too(dirs: dict[str, Path], outer: Path) -> None:
    prefix = dirs["prefix"]
    write_activation(prefix)
    fish_file = prefix / ".verl-bootstrap" / "activate.fish"
    done = subprocess.run(
        [
            shell_path("fish"),
            "--no-config",
            "-c",
            f"{SNAPSHOT} > before; source {outer}/bin/activate.fish; source {fish_file}; "
            "echo IN=$VIRTUAL_ENV; deactivate; echo BACK=$VIRTUAL_ENV; deactivate; "
            f"{SNAPSHOT} > after; cmp before after; and echo RESTORED",
        ],
        env={**_environ(""), "HOME": str(prefix.parent)},
        cwd=prefix.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"IN={prefix}" in done.stdout and f"BACK={outer}" in done.stdout
    assert "RESTORED" in done.stdout, done.stdout + done.stderr
