"""Pick the env backend by name."""

from __future__ import annotations

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.base import EnvBackend
from verl_bootstrap.installer.envs.venv import VenvBackend

__all__ = ["BACKENDS", "get_backend"]

BACKENDS = ("conda", "venv")


def get_backend(name: str, *, conda_exe: str | None = None) -> EnvBackend:
    """The backend for `name`; with `conda_exe`, the user's conda/mamba/micromamba does the work."""
    if name == "venv":
        return VenvBackend()
    if name == "conda":
        from verl_bootstrap.installer.envs import conda  # noqa: PLC0415 - py-rattler, for conda envs only

        if conda_exe:
            return conda.ExternalCondaBackend(conda_exe)
        return conda.CondaBackend()
    raise InputError(f"unknown backend {name!r}", hint=f"choose one of: {', '.join(BACKENDS)}")
