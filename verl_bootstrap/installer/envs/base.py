"""The env-backend interface: create (or reuse) an env at a prefix and name its interpreter."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verl_bootstrap.installer.envs.condahash import LockedConda

__all__ = ["EnvBackend", "EnvRequest", "env_python"]


@dataclass(frozen=True)
class EnvRequest:
    """What the plan asks of a backend."""

    prefix: Path
    python_requires: str  # PEP 440 range, e.g. ">=3.10,<3.13"
    python_prefer: str  # e.g. "3.12"
    interpreter: Path | None = None  # venv: the base interpreter chosen on the host
    channels: tuple[str, ...] = ()  # conda: channel names, URLs or local folders
    conda_packages: tuple[str, ...] = ()  # conda: extra packages beside python
    seed_pip: bool = False  # the env needs pip itself (pip installer, verl's script)
    log_path: Path | None = None
    # conda, --locked: every package's locked digests (None: not a locked install)
    locked_conda: tuple[LockedConda, ...] | None = None


def env_python(prefix: Path) -> Path:
    """The interpreter of an env at `prefix` (venvs and conda prefixes both use bin/python)."""
    return prefix / "bin" / "python"


class EnvBackend(abc.ABC):
    """A way to make an env. `create` is idempotent: it reuses a matching env."""

    name: str

    @abc.abstractmethod
    def create(self, request: EnvRequest) -> bool:
        """Create the env, or reuse one that matches; return True when it was created."""

    @abc.abstractmethod
    def describe(self, request: EnvRequest) -> list[str]:
        """The command (or its equivalent) that creates the env, for `plan` to show."""

    @staticmethod
    def exists(prefix: Path) -> bool:
        """An env of any kind lives at `prefix`."""
        return env_python(prefix).exists()
