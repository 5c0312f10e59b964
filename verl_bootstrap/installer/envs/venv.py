"""The venv backend: uv makes a virtual env from an interpreter already on the machine."""

from __future__ import annotations

from pathlib import Path

from packaging.specifiers import SpecifierSet

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.envs.base import EnvBackend, EnvRequest, env_python
from verl_bootstrap.paths import STATE_DIRNAME

__all__ = ["VenvBackend", "python_version"]


def python_version(python: Path) -> str | None:
    """The X.Y.Z version of an interpreter, or None when it does not run."""
    try:
        out = proc.capture(
            [str(python), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            timeout=30,
        )
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


class VenvBackend(EnvBackend):
    """A uv-made virtual env. No root, no downloads of Python: the interpreter is the host's."""

    name = "venv"

    def describe(self, request: EnvRequest) -> list[str]:
        """`uv venv` with the chosen interpreter."""
        cmd = [uv_binary(), "venv", "--allow-existing", "--no-project"]
        if request.seed_pip:
            cmd.append("--seed")
        return [*cmd, "--python", str(request.interpreter), str(request.prefix)]

    def create(self, request: EnvRequest) -> bool:
        """Make the venv, or reuse one whose interpreter fits the profile's range."""
        if self._reusable(request):
            return False
        _refuse_foreign(request.prefix)
        proc.run(
            self.describe(request),
            log_path=request.log_path,
            env={"UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": None},
        )
        return True

    def _reusable(self, request: EnvRequest) -> bool:
        python = env_python(request.prefix)
        if not (request.prefix / "pyvenv.cfg").is_file() or not python.exists():
            return False
        version = python_version(python)
        if version is None or version not in SpecifierSet(request.python_requires):
            raise InputError(
                f"{request.prefix} holds a venv with Python {version or '(broken)'}, "
                f"outside the profile's range {request.python_requires}",
                hint="choose another --prefix; an env is never replaced behind your back",
            )
        if request.seed_pip and not _has_pip(request.prefix):
            proc.run([str(python), "-m", "ensurepip"], log_path=request.log_path)
        return True


def _has_pip(prefix: Path) -> bool:
    return any(prefix.glob("lib/python*/site-packages/pip"))


def _refuse_foreign(prefix: Path) -> None:
    """Never take over a directory the tool did not create."""
    if not prefix.exists():
        return
    entries = {p.name for p in prefix.iterdir()}
    if entries - {STATE_DIRNAME, "src"}:
        raise InputError(
            f"{prefix} exists and is not an env made by verl-bootstrap",
            hint="choose another --prefix, or move that directory away; it is never overwritten",
        )
