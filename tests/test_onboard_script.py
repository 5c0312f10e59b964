"""The lab's onboarding script installs a tool that exists: by default the very tool that emitted
it, whose wheel `--emit-script FILE` writes beside the script and whose sha256 the script
checks; `--tool REQUIREMENT` for a lab whose index serves it. What can be checked without an
install is here (the whole run, as a new user: test_onboard.py): what is written, what is refused,
and a script run where its wheel is missing or changed, which stops before it makes anything.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from scaffold import invoke

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.paths import file_sha256

LAB = "schema_version: 1\ndefaults: {profile: cpu}\n"


@pytest.fixture(scope="module")
def share(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lab share with its config, and the script and wheel `--emit-script FILE` wrote there."""
    folder = tmp_path_factory.mktemp("share")
    (folder / "lab.yaml").write_text(LAB, encoding="utf-8")
    argv = ["onboard", "--config", str(folder / "lab.yaml"), "--emit-script"]
    done = invoke([*argv, str(folder / "onboard.sh")])
    assert done.code == EXIT_OK, done.err
    return folder


def test_the_script_and_the_tools_own_wheel_are_written_side_by_side(share: Path) -> None:
    (wheel,) = share.glob("verl_bootstrap-*-py3-none-any.whl")
    text = (share / "onboard.sh").read_text(encoding="utf-8")
    assert f"VB_WHEEL='{wheel.name}'\n" in text
    assert f"VB_WHEEL_SHA256='{file_sha256(wheel)}'\n" in text
    assert 'VB_TOOL=${VB_TOOL-""}' in text  # no requirement: the wheel beside it
    assert "verl-bootstrap==" not in text  # no index has it
    assert wheel.stat().st_mode & 0o777 == 0o644  # readable by every member
    for shell in ("sh", "dash"):
        if shutil.which(shell):
            checked = subprocess.run([shell, "-n", str(share / "onboard.sh")], check=False)
            assert checked.returncode == 0


def _script_run(script: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """The script run as a new member would, in an empty HOME."""
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run(
        ["sh", str(script)], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_script_without_its_wheel_says_where_it_looked_and_makes_nothing(
    share: Path, tmp_path: Path
) -> None:
    """Fetched on its own (`curl … > onboard.sh`), the script has no wheel beside it."""
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy2(share / "onboard.sh", alone / "onboard.sh")
    done = _script_run(alone / "onboard.sh", tmp_path / "home")
    assert done.returncode == 1
    assert "is not beside this script" in done.stderr and f"(in {alone})" in done.stderr
    assert "VB_TOOL=verl-bootstrap" in done.stderr  # the other way: the lab's index
    assert list((tmp_path / "home").iterdir()) == []


def test_a_changed_wheel_is_refused_by_its_sha256_before_anything_is_made(
    share: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(share, copy)
    (wheel,) = copy.glob("verl_bootstrap-*.whl")
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    done = _script_run(copy / "onboard.sh", tmp_path / "home")
    assert done.returncode == 1
    assert f"{wheel} is not the wheel this script was made with" in done.stderr
    tool_home = tmp_path / "home" / ".local" / "share" / "verl-bootstrap"
    assert not (tool_home / "tool").exists() and list(tool_home.iterdir()) == []


def test_a_script_on_stdout_has_no_folder_for_the_wheel_unless_the_index_serves_the_tool(
    share: Path,
) -> None:
    argv = ["onboard", "--config", str(share / "lab.yaml"), "--emit-script"]
    refused = invoke(argv)
    assert refused.code == EXIT_BAD_INPUT and refused.out == ""
    assert "stdout has none" in refused.err
    assert "--emit-script FILE" in refused.err and "--tool REQUIREMENT" in refused.err
    served = invoke([*argv, "--tool", "verl-bootstrap==0.1.0"])
    assert served.code == EXIT_OK, served.err
    assert 'VB_TOOL=${VB_TOOL-"verl-bootstrap==0.1.0"}' in served.out
    assert "VB_WHEEL=''" in served.out


def test_a_tool_requirement_holding_a_credential_is_refused(share: Path) -> None:
    argv = ["onboard", "--config", str(share / "lab.yaml"), "--emit-script"]
    done = invoke([*argv, "--tool", "verl-bootstrap @ https://u:s3cr3t@files.lab/t.whl"])
    assert done.code == EXIT_BAD_INPUT
    assert "--tool holds a credential" in done.err and "s3cr3t" not in done.err + done.out
