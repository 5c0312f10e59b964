"""The cpu profile installed once per session, for real, for every test that reads such an env."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from scaffold import Run, run_cli

__all__ = ["Installed", "install_cpu_env"]


@dataclass(frozen=True)
class Installed:
    """The shared cpu env and how it was made."""

    prefix: Path
    repo: Path
    argv: list[str]
    first: Run


def install_cpu_env(
    tmp_path_factory: pytest.TempPathFactory, repo: Path, *, ref: str | None = None
) -> Installed:
    """`verl-bootstrap --profile cpu` from the local verl repo `repo` (v0.9.1, or `ref`)."""
    prefix = tmp_path_factory.mktemp("e2e") / "cpu"
    argv = ["--profile", "cpu", "--prefix", str(prefix), "--verl-source", str(repo), "--json"]
    argv += ["--verl-ref", ref] if ref else []
    return Installed(prefix=prefix, repo=repo, argv=argv, first=run_cli(argv))
