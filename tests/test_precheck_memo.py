"""The precheck's per-user record: the committed cpu lockfile looked up for real once, then the
record taken again; a record that does not fit the lockfile, or is malformed, is ignored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from verl_bootstrap.lock.installing import memo
from verl_bootstrap.lock.installing.prepare import LockedInstall, precheck
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.lookup import hashed_dists
from verl_bootstrap.machine.host.indexes import read_pip_settings
from verl_bootstrap.paths import default_lockfile

CPU_LOCK = default_lockfile("cpu", "cpu", "linux-64")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _locked() -> LockedInstall:
    return LockedInstall(lock=read_lockfile(CPU_LOCK), path=CPU_LOCK, frozen=False)


def _record(cache: Path) -> Path:
    (found,) = (cache / "prechecks").iterdir()
    return found


def test_a_real_precheck_is_kept_and_taken_again(cache: Path) -> None:
    settings = read_pip_settings()
    first = precheck(_locked(), settings, offline=False)
    record = _record(cache)
    assert record.stat().st_mode & 0o777 == 0o600
    names = {d.name for d in hashed_dists(first.lock)}
    assert set(first.artifacts) == names and set(json.loads(record.read_text())["files"]) == names
    # the record is what the next precheck takes: a file it names (with the locked sha256) wins
    body = json.loads(record.read_text())
    torch = body["files"]["torch"]
    torch["url"] = "file:///kept/" + torch["url"].rsplit("/", 1)[-1]
    record.write_text(json.dumps(body))
    again = precheck(_locked(), settings, offline=True)
    assert again.artifacts["torch"].url == torch["url"]
    assert again.artifacts["torch"].sha256 == first.artifacts["torch"].sha256


def _planted(cache: Path, files: dict[str, dict[str, str]], **extra: object) -> None:
    key = memo.memo_key(CPU_LOCK, read_pip_settings(), os.environ)
    path = cache / "prechecks" / f"{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 2, "files": files} | extra))


def _fitting_files() -> dict[str, dict[str, str]]:
    dists = hashed_dists(read_lockfile(CPU_LOCK))
    return {
        d.name: {"url": f"file:///kept/{d.name}.whl", "sha256": d.hashes[0], "kind": "wheel"}
        for d in dists
    }


def test_a_fitting_record_is_recalled(cache: Path) -> None:
    _planted(cache, _fitting_files())
    dists = hashed_dists(read_lockfile(CPU_LOCK))
    key = memo.memo_key(CPU_LOCK, read_pip_settings(), os.environ)
    recalled = memo.recall(key, dists)
    assert recalled is not None and recalled["torch"].url == "file:///kept/torch.whl"


@pytest.mark.parametrize(
    "spoil",
    [
        "a sha256 the lockfile does not allow",
        "a distribution missing",
        "an unknown field",
        "a URL with credentials",
        "a URL of another scheme",
        "a record of schema 1 (it chose the first file by name, an any-wheel over a platform's)",
    ],
)
def test_a_record_that_does_not_fit_is_ignored(cache: Path, spoil: str) -> None:
    files = _fitting_files()
    extra: dict[str, object] = {}
    if spoil == "a sha256 the lockfile does not allow":
        files["torch"]["sha256"] = "0" * 64
    elif spoil == "a distribution missing":
        files.pop("torch")
    elif spoil == "an unknown field":
        extra["extra"] = 1
    elif spoil == "a URL with credentials":
        files["torch"]["url"] = "https://user:secret@mirror.example/torch.whl"
    elif spoil == "a URL of another scheme":
        files["torch"]["url"] = "ftp://mirror.example/torch.whl"
    else:
        extra["schema_version"] = 1
    _planted(cache, files, **extra)
    key = memo.memo_key(CPU_LOCK, read_pip_settings(), os.environ)
    assert memo.recall(key, hashed_dists(read_lockfile(CPU_LOCK))) is None


def test_other_index_settings_or_variables_make_another_key() -> None:
    settings = read_pip_settings()
    base = memo.memo_key(CPU_LOCK, settings, {})
    mirror = memo.memo_key(CPU_LOCK, type(settings)(index_url="https://mirror.example/simple"), {})
    variable = memo.memo_key(CPU_LOCK, settings, {"UV_INDEX_URL": "https://mirror.example/"})
    assert len({base, mirror, variable}) == 3


def test_credentials_are_never_written(cache: Path) -> None:
    from verl_bootstrap.lock.lookup import Artifact  # noqa: PLC0415 - this test only

    secret = Artifact(url="https://user:secret@mirror.example/x.whl", sha256="a" * 64, kind="wheel")
    memo.remember("k" * 64, {"x": secret})
    assert not (cache / "prechecks").exists() or not any((cache / "prechecks").iterdir())
