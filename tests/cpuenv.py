"""The cpu profile installed once per session, for real, for every test that reads such an env."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from verl_bootstrap import cli

__all__ = ["Installed", "Run", "install_cpu_env", "run_cli"]


@dataclass(frozen=True)
class Run:
    """One CLI run: its exit code, its JSON report, and what it wrote to stderr."""

    code: int
    body: dict[str, Any]
    stderr: str

    @property
    def statuses(self) -> dict[str, str]:
        return {s["id"]: s["status"] for s in self.body["steps"]}


def run_cli(argv: list[str]) -> Run:
    """`verl-bootstrap ARGV` in this process, with its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return Run(code=code, body=json.loads(out.getvalue()), stderr=err.getvalue())


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
