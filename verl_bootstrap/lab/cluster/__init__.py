"""Clusters: verify (and install) an env on every node of a Ray cluster or a Slurm allocation."""

from __future__ import annotations
