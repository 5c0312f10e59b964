"""Activation: the lines that enter an env (and `deactivate` to leave), with no conda needed.

Besides PATH and the conda/venv variables, activation keeps foreign CUDA libraries (a system
cuDNN or NCCL on LD_LIBRARY_PATH) off the load path, so torch loads the ones its wheels ship.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from installer.options import state_dir
from installer.state import atomic_write

__all__ = ["SHELLS", "activation_script", "clean_library_path", "write_activation"]

SHELLS = ("bash", "zsh", "fish")
_FOREIGN = ("libcudnn", "libnccl", "libcublas", "libcudart")


def clean_library_path(value: str, prefix: Path) -> str:
    """LD_LIBRARY_PATH without folders (outside the env) that hold CUDA libraries torch ships."""
    kept = []
    for entry in (e for e in value.split(os.pathsep) if e):
        folder = Path(entry)
        inside = folder.resolve().is_relative_to(prefix.resolve()) if folder.exists() else False
        if inside or not _holds_cuda_libs(folder):
            kept.append(entry)
    return os.pathsep.join(kept)


def _holds_cuda_libs(folder: Path) -> bool:
    try:
        return any(p.name.startswith(_FOREIGN) for p in folder.iterdir())
    except OSError:
        return False


def _variables(prefix: Path, library_path: str) -> dict[str, str | None]:
    conda = (prefix / "conda-meta").is_dir()
    toolkit = prefix / "bin" / "nvcc"
    return {
        "PATH": f"{prefix / 'bin'}:$PATH",
        "VIRTUAL_ENV": None if conda else str(prefix),
        "CONDA_PREFIX": str(prefix) if conda else None,
        "CONDA_DEFAULT_ENV": prefix.name if conda else None,
        "CUDA_HOME": str(prefix) if toolkit.exists() else None,
        "LD_LIBRARY_PATH": clean_library_path(library_path, prefix) or None,
        "PYTHONNOUSERSITE": "1",
    }


def activation_script(prefix: Path, shell: str = "bash", library_path: str | None = None) -> str:
    """Shell code that enters the env at `prefix`; `deactivate` restores the previous values."""
    lib = os.environ.get("LD_LIBRARY_PATH", "") if library_path is None else library_path
    variables = {k: v for k, v in _variables(prefix, lib).items() if v is not None}
    if shell == "fish":
        return _fish(variables)
    return _posix(variables)


def _posix(variables: dict[str, str]) -> str:
    names = " ".join(variables)
    lines = [
        "# enter the verl env; `deactivate` leaves it",
        f'for _vb in {names}; do eval "_VB_OLD_$_vb=\\${{$_vb-__unset__}}"; done',
    ]
    for name, value in variables.items():
        quoted = shlex.quote(value).replace("'$PATH'", '"$PATH"')
        if name == "PATH":
            quoted = f'"{value}"'
        lines.append(f"export {name}={quoted}")
    lines += [
        "deactivate() {",
        f"  for _vb in {names}; do",
        '    eval "_v=\\$_VB_OLD_$_vb"',
        '    if [ "$_v" = __unset__ ]; then unset "$_vb"; else export "$_vb=$_v"; fi',
        '    unset "_VB_OLD_$_vb"',
        "  done",
        "  unset -f deactivate; unset _vb _v",
        "  hash -r 2>/dev/null || true",
        "}",
        "hash -r 2>/dev/null || true",
    ]
    return "\n".join(lines) + "\n"


def _fish(variables: dict[str, str]) -> str:
    lines = ["# enter the verl env; `deactivate` leaves it"]
    restore = []
    for name, value in variables.items():
        lines.append(f"set -gx _VB_OLD_{name} (set -q {name}; and echo ${name}; or echo __unset__)")
        shown = value.replace("$PATH", "$PATH") if name != "PATH" else value
        if name == "PATH":
            lines.append(f"set -gx PATH {shlex.quote(value.split(':')[0])} $PATH")
        else:
            lines.append(f"set -gx {name} {shlex.quote(shown)}")
        restore.append(
            f'  if test "$_VB_OLD_{name}" = __unset__; set -e {name}; '
            f"else; set -gx {name} $_VB_OLD_{name}; end; set -e _VB_OLD_{name}"
        )
    lines += ["function deactivate", *restore, "  functions -e deactivate", "end"]
    return "\n".join(lines) + "\n"


def write_activation(prefix: Path) -> Path:
    """Write the env's POSIX activation script; return its path (source it to enter the env)."""
    path = state_dir(prefix) / "activate"
    atomic_write(path, activation_script(prefix, "bash", library_path=""))
    return path


def activation_line(prefix: Path) -> str:
    """The one line that enters the env."""
    return f". {shlex.quote(str(state_dir(prefix) / 'activate'))}"
