"""Generated shell is inert: a hostile value becomes data in every shell, or is refused.

Activation files are sourced for real in bash, sh, zsh and fish from a prefix whose name holds
quotes, `$(...)`, backticks and backslashes; a batch script carries the same in its arguments;
a symlinked rc file stays a link while its target gains the block.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from shells import shell_path

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.activation import activation_script, write_activation
from verl_bootstrap.lab.cluster.nodescript import sbatch_script
from verl_bootstrap.lab.onboard import write_rc_block

HOSTILE = "env $(touch PWNED) `touch PWNED` 'q' \"d\" \\x \\' \\\\; touch PWNED #"


def run_in(shell: str, script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [shell_path(shell), "-c", script]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("shell", ["bash", "sh", "zsh", "fish"])
def test_a_hostile_prefix_is_only_data_when_sourced(shell: str, tmp_path: Path) -> None:
    prefix = tmp_path / HOSTILE
    (prefix / "bin").mkdir(parents=True)
    write_activation(prefix)
    name = "activate.fish" if shell == "fish" else "activate"
    script = prefix / ".verl-bootstrap" / name
    source = "source" if shell == "fish" else "."
    quoted = "'" + str(script).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if shell != "fish":
        quoted = "'" + str(script).replace("'", "'\\''") + "'"
    done = run_in(shell, f'{source} {quoted}; printf "%s" "$VERL_BOOTSTRAP_PREFIX"', tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == str(prefix)
    assert not list(tmp_path.rglob("PWNED")), "the prefix's name ran as code"


def test_a_line_break_in_the_prefix_is_refused(tmp_path: Path) -> None:
    for shell in ("bash", "fish"):
        with pytest.raises(InputError, match="line break"):
            activation_script(tmp_path / "a\ntouch PWNED", shell)


def test_the_batch_script_quotes_its_arguments_and_checks_its_sbatch_lines(tmp_path: Path) -> None:
    text = sbatch_script(
        action="verify", tool="verl-bootstrap", args=["--prefix", HOSTILE], nodes=2
    )
    body = text.replace("exec verl-bootstrap", "printf '%s\\n' verl-bootstrap")
    done = run_in("bash", body, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == HOSTILE
    assert not list(tmp_path.rglob("PWNED"))
    for bad in ({"partition": "gpu\ntouch PWNED"}, {"time": "1:00 $(id)"}):
        with pytest.raises(InputError, match="#SBATCH"):
            sbatch_script(action="verify", tool="t", args=[], nodes=1, **bad)
    with pytest.raises(InputError, match="line break"):
        sbatch_script(action="verify", tool="t", args=["a\nb"], nodes=1)


def test_a_symlinked_rc_file_stays_a_link_and_its_target_is_edited(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "bashrc").write_text("alias ll='ls -l'\n")
    rc = tmp_path / ".bashrc"
    rc.symlink_to(dotfiles / "bashrc")
    activation = tmp_path / "activate"
    assert write_rc_block(rc, "bash", activation)
    assert rc.is_symlink() and rc.readlink() == dotfiles / "bashrc"
    text = (dotfiles / "bashrc").read_text()
    assert text.startswith("alias ll='ls -l'\n") and str(activation) in text
    assert not write_rc_block(rc, "bash", activation)  # idempotent through the link
