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


def test_every_file_the_tool_reads_under_profiles_and_lockfiles_is_shipped() -> None:
    """Each file of profiles/ and lockfiles/ (kernel-wheels/recorded.yaml too) is matched by a
    data-files entry that puts it under the same folder of share/verl-bootstrap."""
    shipped = _data_files()
    for top in ("profiles", "lockfiles"):
        for path in sorted(p for p in (ROOT / top).rglob("*") if p.is_file()):
            inside = path.relative_to(ROOT)
            key = f"share/verl-bootstrap/{inside.parent}"
            assert any(inside.match(glob) for glob in shipped.get(key, [])), (
                f'{inside} is not in the wheel: add {key} = ["{inside.parent}/*{path.suffix}"]'
            )
