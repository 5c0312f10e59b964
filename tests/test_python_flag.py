"""`--python` as uv reads it: an interpreter's path, or a version X.Y found on this machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from scaffold import tool_argv

from verl_bootstrap.errors import InputError
from verl_bootstrap.machine.host.interpreters import interpreter_for

THIS = f"{sys.version_info.major}.{sys.version_info.minor}"


def _version(python: Path) -> str:
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_version_finds_an_interpreter_of_that_version() -> None:
    found = interpreter_for(THIS)
    assert found.is_file() and _version(found) == THIS
    assert _version(interpreter_for(f"python{THIS}")) == THIS


def test_a_path_is_taken_as_it_is(tmp_path: Path) -> None:
    assert interpreter_for(sys.executable) == Path(sys.executable).absolute()


@pytest.mark.parametrize("given", ["/nonexistent/python3", "3.x", "/etc/hostname"])
def test_what_is_no_interpreter_is_refused_with_a_hint(given: str) -> None:
    with pytest.raises(InputError, match="not a Python interpreter") as raised:
        interpreter_for(given)
    assert "3.12" in (raised.value.hint or "")


def test_a_version_this_machine_lacks_says_so() -> None:
    with pytest.raises(InputError, match=r"no Python ==3\.99\.\* found"):
        interpreter_for("3.99")


def test_plan_takes_a_version_for_python(tmp_path: Path) -> None:
    argv = tool_argv("plan", "--profile", "cpu", "--resolve")
    argv += ["--python", THIS, "--prefix", str(tmp_path / "env"), "--offline"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert f"python{THIS}" in done.stdout or f"{THIS}" in done.stdout
