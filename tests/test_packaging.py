"""The wheel carries the shipped profiles and lockfiles, so an installed tool knows them."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the dev machines run 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _data_files() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["data-files"]


def test_every_lockfile_folder_is_shipped_in_the_wheel() -> None:
    shipped = _data_files()
    for folder in sorted(p for p in (ROOT / "lockfiles").iterdir() if p.is_dir()):
        key = f"share/verl-bootstrap/lockfiles/{folder.name}"
        assert shipped.get(key) == [f"lockfiles/{folder.name}/*.yaml"], f"add {key} to pyproject"


def test_profiles_are_shipped_in_the_wheel() -> None:
    assert _data_files()["share/verl-bootstrap/profiles"] == ["profiles/*.yaml"]
