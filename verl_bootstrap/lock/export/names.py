"""The export formats and their default outputs: names only, so the CLI's parser stays cheap."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONTAINER_FORMATS", "DEFAULT_OUTPUT", "FORMATS"]

FORMATS = ("conda-lock", "pylock", "requirements", "apptainer", "dockerfile")
CONTAINER_FORMATS = ("apptainer", "dockerfile")
DEFAULT_OUTPUT = {
    "conda-lock": Path("conda-lock.yml"),
    "pylock": Path("pylock.toml"),
    "requirements": Path("requirements"),
    "apptainer": Path("verl.def"),
    "dockerfile": Path("Dockerfile"),
}
