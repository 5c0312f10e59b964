"""A `--locked` conda env links only packages whose sha256 is the lockfile's, for real: py-rattler
solves from the repo's local conda channel (tests/condafixture.py) and installs into a prefix."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.installer.envs.base import EnvRequest, env_python
from verl_bootstrap.installer.envs.conda import CondaBackend
from verl_bootstrap.installer.envs.condahash import LockedConda
from verl_bootstrap.installer.envs.condarc import CondaSettings

HOST_XY = "{}.{}".format(*sys.version_info[:2])


def _records(channel: Path) -> dict[str, dict[str, str]]:
    """The channel's python record (linux-64) by file name."""
    data = json.loads((channel / "linux-64" / "repodata.json").read_text())
    return {**data.get("packages", {}), **data.get("packages.conda", {})}


def _locked(channel: Path) -> tuple[LockedConda, ...]:
    return tuple(
        LockedConda(name=r["name"], sha256=r["sha256"], md5=r["md5"])
        for r in _records(channel).values()
    )


def _request(prefix: Path, channel: Path, locked: tuple[LockedConda, ...]) -> EnvRequest:
    return EnvRequest(
        prefix=prefix,
        python_requires=f">={HOST_XY},<{HOST_XY}.99",
        python_prefer=HOST_XY,
        channels=(str(channel),),
        locked_conda=locked,
    )


def _flip(digest: str) -> str:
    return digest[:-1] + ("0" if digest[-1] != "0" else "1")


def _create(tmp: Path, channel: Path, locked: tuple[LockedConda, ...]) -> Path:
    prefix = tmp / "env"
    backend = CondaBackend(cache_root=tmp / "cache", settings=CondaSettings())
    backend.create(_request(prefix, channel, locked))
    return prefix


def test_the_locked_packages_are_linked(python_channel: Path, tmp_path: Path) -> None:
    prefix = _create(tmp_path, python_channel, _locked(python_channel))
    assert env_python(prefix).is_file()


def test_a_package_whose_sha256_is_not_the_locked_one_is_refused_before_linking(
    python_channel: Path, tmp_path: Path
) -> None:
    locked = _locked(python_channel)
    tampered = tuple(LockedConda(p.name, _flip(p.sha256 or ""), p.md5) for p in locked)
    with pytest.raises(StepFailed, match=r"python .*: sha256 [0-9a-f]{64}, the lock has"):
        _create(tmp_path, python_channel, tampered)
    assert not (tmp_path / "env" / "conda-meta").exists()
    assert not env_python(tmp_path / "env").exists()


def test_a_channel_serving_another_file_under_the_locked_name_is_refused(
    python_channel: Path, tmp_path: Path
) -> None:
    """The channel's record of python-X-h0_0 names another archive than the one locked."""
    locked = _locked(python_channel)
    channel = tmp_path / "channel"
    shutil.copytree(python_channel, channel)
    repodata = channel / "linux-64" / "repodata.json"
    data = json.loads(repodata.read_text())
    for section in ("packages", "packages.conda"):
        for record in data.get(section, {}).values():
            record["sha256"], record["md5"] = "1" * 64, "2" * 32
    repodata.write_text(json.dumps(data))
    with pytest.raises(StepFailed, match="does not match the lockfile's conda packages"):
        _create(tmp_path, channel, locked)
    assert not env_python(tmp_path / "env").exists()


def test_an_md5_only_lock_is_compared_by_md5(python_channel: Path, tmp_path: Path) -> None:
    md5_only = tuple(LockedConda(p.name, None, _flip(p.md5 or "")) for p in _locked(python_channel))
    with pytest.raises(StepFailed, match=r"md5 [0-9a-f]{32}, the lock has"):
        _create(tmp_path, python_channel, md5_only)


def test_a_reused_prefix_is_held_to_the_locked_digests(
    python_channel: Path, tmp_path: Path
) -> None:
    prefix = _create(tmp_path, python_channel, _locked(python_channel))
    before = sorted(p.name for p in (prefix / "conda-meta").iterdir())
    other = tuple(LockedConda(p.name, _flip(p.sha256 or ""), None) for p in _locked(python_channel))
    with pytest.raises(StepFailed, match=r"the conda env at .* does not match"):
        _create(tmp_path, python_channel, other)
    assert sorted(p.name for p in (prefix / "conda-meta").iterdir()) == before


def test_a_local_channel_file_replaced_after_indexing_is_refused_before_linking(
    python_channel: Path, tmp_path: Path
) -> None:
    """py-rattler does not hash a file:// channel's archive; the locked install does."""
    channel = tmp_path / "channel"
    shutil.copytree(python_channel, channel)
    (archive,) = (channel / "linux-64").glob("python-*.conda")
    archive.write_bytes(archive.read_bytes() + b"\0")  # replaced: other bytes, same name
    with pytest.raises(StepFailed, match=r"has sha256 [0-9a-f]{64}, its channel's record"):
        _create(tmp_path, channel, _locked(python_channel))
    assert not env_python(tmp_path / "env").exists()
