"""The export formats and their default outputs: names only, so the CLI's parser stays cheap."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEFAULT_OUTPUT", "FORMATS"]

FORMATS = ("conda-lock", "pylock", "requirements")
DEFAULT_OUTPUT = {
    "conda-lock": Path("conda-lock.yml"),
    "pylock": Path("pylock.toml"),
    "requirements": Path("requirements"),
}
