"""The per-user bytecode store, for real: two uv venvs with the same package; the first one's
import is compiled and harvested, the second one's is served from the store (Python's own
verbose import log proves it loaded the pyc and compiled nothing)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import marshal
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.paths import bytecode_store
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.verify import bytecode
from verl_bootstrap.verify.env import verify_env

PACKAGE = "packaging"
VERSION = importlib.metadata.version(PACKAGE)  # the tool's own pin: in uv's cache already
MODULES = "import packaging.version, packaging.specifiers, packaging.requirements"


def _make_env(prefix: Path) -> Path:
    """A real venv of the test interpreter with PACKAGE installed by uv (RECORD with sha256)."""
    subprocess.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(prefix)], check=True)
    python = prefix / "bin" / "python"
    subprocess.run(
        [uv_binary(), "pip", "install", "-q", "--python", str(python), f"{PACKAGE}=={VERSION}"],
        check=True,
    )
    return python


def _site_package(python: Path) -> Path:
    argv = [str(python), "-c", f"import {PACKAGE}, os; print(os.path.dirname({PACKAGE}.__file__))"]
    quiet = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # asking must compile nothing
    found = subprocess.run(argv, check=True, capture_output=True, text=True, env=quiet)
    return Path(found.stdout.strip())


def _import_verbose(python: Path) -> str:
    """Python's own import log (-v) of the package's modules, pycs written as usual."""
    done = subprocess.run(
        [str(python), "-v", "-c", MODULES], check=True, capture_output=True, text=True
    )
    return done.stderr


def _loaded_from(log: str, package: Path) -> dict[str, str]:
    """module file stem -> 'pyc' (code object read from __pycache__) or 'source' (compiled)."""
    found = {}
    for match in re.finditer(r"^# code object from '?([^'\n]+)'?$", log, re.MULTILINE):
        path = Path(match.group(1))
        if path.suffix == ".pyc" and path.parent.parent == package:
            found[path.name.split(".")[0]] = "pyc"
        elif path.suffix == ".py" and path.parent == package:
            found[path.stem] = "source"
    return found


def _pycs(package: Path) -> dict[str, Path]:
    return {p.name.split(".")[0]: p for p in (package / "__pycache__").glob("*.pyc")}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty store of this test's own, and Python allowed to write bytecode."""
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv(bytecode.OPT_OUT, raising=False)
    return bytecode_store()


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("pyc-envs")
    return _make_env(base / "one"), _make_env(base / "two")


def _fresh(python: Path) -> Path:
    """The env's package with no bytecode (module-scoped envs are reused by several tests)."""
    package = _site_package(python)
    for pyc in package.glob("__pycache__/*.pyc"):
        pyc.unlink()
    return package


def _filled(python: Path) -> int:
    """Compile the package in `python`'s env by importing it, and harvest: what was stored."""
    _fresh(python)
    _import_verbose(python)
    answer = bytecode.harvest(python, python.parents[1], None)
    assert answer["errors"] == 0, answer
    return int(answer["stored"])


def test_a_second_env_imports_from_the_store_and_compiles_nothing(
    store: Path, envs: tuple[Path, Path]
) -> None:
    one, two = envs
    stored = _filled(one)
    package = _fresh(two)
    restored = bytecode.restore(two, two.parents[1], None)
    pycs = _pycs(package)
    assert stored >= 3 and restored["restored"] >= 3 and len(pycs) >= 3, (stored, restored)
    for pyc in pycs.values():
        head = pyc.read_bytes()[:16]
        assert head[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(head[4:8], "little") == 0b11  # PEP 552: checked hash
        assert pyc.stat().st_nlink >= 2  # a hard link to the store's copy
    inodes = {name: p.stat().st_ino for name, p in pycs.items()}
    used = _loaded_from(_import_verbose(two), package)
    assert {"version", "specifiers", "requirements"} <= set(used)
    assert set(used.values()) == {"pyc"}, used  # nothing compiled from source
    assert {n: p.stat().st_ino for n, p in _pycs(package).items()} == inodes  # none rewritten


def test_an_edited_source_is_recompiled_not_served_the_stored_pyc(
    store: Path, envs: tuple[Path, Path]
) -> None:
    one, two = envs
    _filled(one)
    package = _fresh(two)
    source = package / "version.py"
    original = source.read_bytes()
    try:
        source.write_bytes(original + b"\nEDITED_HERE = 1\n")
        bytecode.restore(two, two.parents[1], None)
        stored = _pycs(package)["version"]
        stored_bytes = stored.read_bytes()
        used = _loaded_from(_import_verbose(two), package)
        assert used["version"] == "source"
        rewritten = _pycs(package)["version"]
        assert rewritten.read_bytes()[8:16] == importlib.util.source_hash(source.read_bytes())
        check = [str(two), "-c", "import packaging.version as v; print(v.EDITED_HERE)"]
        assert subprocess.run(check, check=True, capture_output=True, text=True).stdout == "1\n"
        entries = list(store.rglob("*.pyc"))
        assert stored_bytes in [e.read_bytes() for e in entries]  # the store's copy untouched
    finally:
        source.write_bytes(original)


def test_two_harvests_at_once_leave_only_whole_valid_entries(
    store: Path, envs: tuple[Path, Path]
) -> None:
    one, two = envs
    for python in envs:
        _fresh(python)
        _import_verbose(python)
    answers: list[dict[str, object]] = []
    workers = [
        threading.Thread(target=lambda p=p: answers.append(bytecode.harvest(p, p.parents[1], None)))
        for p in (one, two, one)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert all(a["errors"] == 0 for a in answers), answers
    entries = [p for p in store.rglob("*") if p.is_file()]
    assert entries and all(p.suffix == ".pyc" and not p.name.startswith(".") for p in entries)
    for entry in entries:
        data = entry.read_bytes()
        assert data[4:8] == (0b11).to_bytes(4, "little")
        marshal.loads(data[16:])  # a whole code object, not a torn write
        assert entry.stat().st_mode & 0o777 == 0o444


def test_a_symlink_planted_in_the_store_is_not_followed(
    store: Path, envs: tuple[Path, Path], tmp_path: Path
) -> None:
    one, two = envs
    _filled(one)
    entries = sorted(store.rglob("*.pyc"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "planted.pyc").write_bytes(entries[0].read_bytes())
    victim = entries[0]
    victim.unlink()
    victim.symlink_to(outside / "planted.pyc")  # an entry that points out of the store
    folder = entries[-1].parent
    if folder != victim.parent:
        moved = outside / "moved"
        folder.rename(moved)
        folder.symlink_to(moved)  # a whole folder of entries that points out
    package = _fresh(two)
    bytecode.restore(two, two.parents[1], None)
    for pyc in _pycs(package).values():
        assert pyc.resolve().parent.parent == package  # none links to anything outside
        assert pyc.stat().st_ino != (outside / "planted.pyc").stat().st_ino
    _import_verbose(two)
    before = _contents(outside)
    bytecode.harvest(two, two.parents[1], None)
    assert _contents(outside) == before  # nothing written through a symlink
    assert not victim.is_symlink()  # the planted link itself was replaced by a real entry


def _contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_store_writable_by_others_or_a_symlink_is_not_used(
    store: Path, envs: tuple[Path, Path], tmp_path: Path
) -> None:
    one, _ = envs
    store.parent.mkdir(parents=True)
    store.mkdir(mode=0o700)
    store.chmod(0o777)
    answer = bytecode.restore(one, one.parents[1], None)
    assert "writable by others" in answer["error"]
    store.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    store.symlink_to(tmp_path / "elsewhere")
    assert "not a folder" in bytecode.harvest(one, one.parents[1], None)["error"]


def test_the_store_is_made_private(store: Path, envs: tuple[Path, Path]) -> None:
    _filled(envs[0])
    for folder in [store, *[p for p in store.rglob("*") if p.is_dir()]]:
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_verify_reports_what_the_store_did_and_the_opt_out_turns_it_off(
    store: Path, envs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = envs
    _filled(one)
    _fresh(two)
    spec = VerifySpec(imports=("packaging.version",), gpu_smoke=False, bf16=False)
    log = two.parents[1] / "verify.log"
    report = verify_env(two.parents[1], spec, log_path=log)
    assert report.ok
    assert report.to_json()["bytecode"]["restored"] >= 1
    assert "bytecode restore:" in log.read_text()
    monkeypatch.setenv(bytecode.OPT_OUT, "1")
    _fresh(two)
    off = verify_env(two.parents[1], spec).to_json()["bytecode"]
    assert off["restored"] == 0 and bytecode.OPT_OUT in off["note"]


def test_verify_fills_the_store_even_under_pythondontwritebytecode(
    store: Path, envs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI and many images set PYTHONDONTWRITEBYTECODE: verify's own probe compiles anyway, so
    the store fills and the next env's first import is warm."""
    _, two = envs
    package = _fresh(two)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    spec = VerifySpec(imports=("packaging.version",), gpu_smoke=False, bf16=False)
    report = verify_env(two.parents[1], spec).to_json()["bytecode"]
    assert report["stored"] >= 1, report
    assert "note" not in report, report
    assert "version" in _pycs(package)
    assert any(store.rglob("*.pyc"))


def test_a_pyc_others_can_write_is_not_stored(store: Path, envs: tuple[Path, Path]) -> None:
    one, _ = envs
    package = _fresh(one)
    _import_verbose(one)
    for pyc in package.glob("__pycache__/*.pyc"):
        pyc.chmod(0o666)  # its code could be anyone's: Python checks only its date and size
    answer = bytecode.harvest(one, one.parents[1], None)
    assert answer["stored"] == 0 and answer["not_own"] >= 3, answer
    assert not list(store.rglob("*.pyc"))


def test_a_store_on_another_filesystem_is_copied_from(
    envs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = envs
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    shm = Path("/dev/shm")  # a tmpfs on Linux hosts: another filesystem than the envs'
    root = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else None))
    try:
        monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(root))
        assert _filled(one) >= 3
        package = _fresh(two)
        assert bytecode.restore(two, two.parents[1], None)["restored"] >= 3
        cross = root.stat().st_dev != package.stat().st_dev
        for pyc in _pycs(package).values():
            assert pyc.stat().st_nlink == (1 if cross else 2)  # a copy where a link cannot be
            assert pyc.read_bytes()[4:8] == (0b11).to_bytes(4, "little")
        assert set(_loaded_from(_import_verbose(two), package).values()) == {"pyc"}
    finally:
        shutil.rmtree(root)


def test_restore_never_replaces_a_pyc_that_is_there(store: Path, envs: tuple[Path, Path]) -> None:
    one, two = envs
    _filled(one)
    package = _fresh(two)
    _import_verbose(two)  # Python's own timestamp pycs
    before = {name: (p.stat().st_ino, p.read_bytes()) for name, p in _pycs(package).items()}
    answer = bytecode.restore(two, two.parents[1], None)
    assert answer["restored"] == 0 and answer["present"] >= 3, answer
    after = {name: (p.stat().st_ino, p.read_bytes()) for name, p in _pycs(package).items()}
    assert after == before
