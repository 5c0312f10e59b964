"""Env backends: where the verl env lives (a conda prefix or a venv) and how it is made."""

from __future__ import annotations

from verl_bootstrap.installer.envs.base import EnvBackend, EnvRequest, env_python

__all__ = ["EnvBackend", "EnvRequest", "env_python"]
