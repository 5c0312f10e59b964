"""Every native library links: real ELF libraries built with gcc and a version script (a user
that needs `wave@GREET_1` from libgreet.so.1; an old libgreet that lacks it; a new one that has
it), read by the tool's ELF reader, judged as the dynamic loader judges them (the real loader is
asked too), in a real env's verify and from wheels as `lock --check --links` reads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from elflibs import SONAME, VERSION, Built, build, env_with, lock_of, wheel_of
from scaffold import run_cli

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_STEP_FAILED
from verl_bootstrap.lock.making.nativelinks import LinkCheck, native_link_gaps
from verl_bootstrap.lock.making.wheellibs import wheel_libraries
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.profile.models import VerifySpec
from verl_bootstrap.verify.elf import ElfError, read_links
from verl_bootstrap.verify.env import verify_env
from verl_bootstrap.verify.links import Library, env_libraries, link_gaps


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build(tmp_path_factory.mktemp("elf"))


def _read(path: Path) -> Library:
    with path.open("rb") as stream:
        return Library(path.name, f"{path.parent.name} 1.0", read_links(stream))


def test_the_reader_finds_what_a_library_defines_and_needs(built: Built) -> None:
    user, old, new = _read(built.user), _read(built.old), _read(built.new)
    assert user.links.needs[SONAME] == {VERSION: frozenset({"greet", "wave"})}
    assert SONAME in user.links.needed
    assert (old.name, new.name) == (SONAME, SONAME)
    assert old.links.defines == {VERSION: frozenset({"greet"})}
    assert new.links.defines == {VERSION: frozenset({"greet", "wave"})}


def test_a_need_the_provider_lacks_is_a_gap_and_the_loader_agrees(built: Built) -> None:
    [gap] = link_gaps([_read(built.user), _read(built.old)])
    assert (gap.version, gap.missing) == (VERSION, ("wave",))
    assert gap.line() == (
        "libuser.so (user 1.0) needs wave at version GREET_1 of libgreet.so.1, which old 1.0 "
        "does not define: loading it fails with `undefined symbol`"
    )
    assert link_gaps([_read(built.user), _read(built.new)]) == []
    # the real dynamic loader says the same of each pairing
    for provider, fails in ((built.old, True), (built.new, False)):
        code = f"import ctypes; ctypes.CDLL({str(built.user)!r})"
        env = {"LD_LIBRARY_PATH": str(provider.parent)}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
        )
        assert (done.returncode != 0) == fails, done.stderr
        if fails:
            assert f"undefined symbol: wave, version {VERSION}" in done.stderr


def test_a_provider_the_set_lacks_comes_from_the_host_and_is_not_judged(built: Built) -> None:
    assert link_gaps([_read(built.user)]) == []  # libgreet is not in the set: the host's


def test_a_damaged_library_is_refused_not_misread(built: Built, tmp_path: Path) -> None:
    whole = built.new.read_bytes()
    small = bytearray(whole)
    small[58:60] = (1).to_bytes(2, "little")  # e_shentsize: section headers of 1 byte
    cut = whole[: len(whole) // 2]  # the section headers, at the end, are gone
    for name, data, said in (("small", small, "section headers of 1 bytes"), ("cut", cut, "ends")):
        path = tmp_path / f"lib{name}.so"
        path.write_bytes(bytes(data))
        with path.open("rb") as stream, pytest.raises(ElfError, match=said):
            read_links(stream)


def test_a_file_that_is_not_elf_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "libnot.so"
    bad.write_bytes(b"not an ELF file at all")
    with bad.open("rb") as stream, pytest.raises(ElfError, match="not an ELF file"):
        read_links(stream)
    cut = tmp_path / "libcut.so"
    cut.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x03\0" + b"\xff" * 46)
    with cut.open("rb") as stream, pytest.raises(ElfError):
        read_links(stream)


def test_libraries_are_read_from_inside_awheel_of(built: Built, tmp_path: Path) -> None:
    wheel = wheel_of(
        tmp_path, "greet_old", {f"greet/lib/{SONAME}": built.old, "greet/x.so.txt": built.old}
    )
    [(member, links)] = wheel_libraries(wheel)
    assert member == f"greet/lib/{SONAME}" and links.defines == {VERSION: frozenset({"greet"})}


def _env_with(root: Path, provider: Path, built: Built) -> Path:
    """A real venv holding the user and `provider`, each its distribution's."""
    return env_with(
        root / "env",
        {
            "greet_user": {"greet_user/libuser.so": built.user},
            "libgreet": {f"libgreet/lib/{SONAME}": provider},
        },
    )


def test_verify_fails_an_env_whose_library_needs_what_its_provider_lacks(
    built: Built, tmp_path: Path
) -> None:
    prefix = _env_with(tmp_path / "old", built.old, built)
    report = verify_env(prefix, VerifySpec(imports=(), gpu_smoke=False))
    [check] = [c for c in report.checks if c.name == "native links"]
    assert check.status == "fail" and not report.ok
    assert check.detail == (
        "greet_user/libuser.so (greet-user 1.0) needs wave at version GREET_1 of libgreet.so.1, "
        "which libgreet 1.0 does not define: loading it fails with `undefined symbol`"
    )
    fixed = _env_with(tmp_path / "new", built.new, built)
    [check] = [
        c
        for c in verify_env(fixed, VerifySpec(imports=(), gpu_smoke=False)).checks
        if c.name == "native links"
    ]
    assert check.status == "ok" and check.data["libraries"] >= 2, check


def test_an_envs_libraries_are_named_by_the_distribution_that_installed_them(
    built: Built, tmp_path: Path
) -> None:
    prefix = _env_with(tmp_path, built.new, built)
    found = {
        lib.where: lib.owner for lib in env_libraries(prefix.glob("lib/python3*/site-packages"))
    }
    assert found == {
        "greet_user/libuser.so": "greet-user 1.0",
        f"libgreet/lib/{SONAME}": "libgreet 1.0",
    }


def test_a_locks_wheels_are_read_once_and_their_links_judged(built: Built, tmp_path: Path) -> None:
    """`lock --check --links`'s reading: the lock's wheels found on find-links by sha256,
    downloaded, read, kept in the cache by sha256; offline, the cache alone answers."""
    links = tmp_path / "links"
    links.mkdir()
    user = wheel_of(links, "greet_user", {"greet_user/libuser.so": built.user})
    old = wheel_of(links, "greet_old", {f"greet_old/lib/{SONAME}": built.old})
    pure = links / "greet_docs-1.0-py3-none-any.whl"  # a pure-Python wheel: not read
    pure.write_bytes(wheel_of(tmp_path, "greet_docs", {}).read_bytes())
    lock = lock_of(tmp_path, [user, old, pure])
    sha = {w.name: file_sha256(w) for w in (user, old, pure)}
    settings = IndexSettings(index_url=(tmp_path / "no-index").as_uri(), find_links=(str(links),))
    cache = tmp_path / "cache"
    cache.mkdir()
    check = LinkCheck(settings, tmp_path / "work", cache)
    said = (
        "greet_user/libuser.so (greet-user 1.0) needs wave at version GREET_1 of libgreet.so.1, "
        "which greet-old 1.0 does not define: loading it fails with `undefined symbol`"
    )
    assert native_link_gaps(lock, check) == [said]
    read = sorted(p.stem for p in cache.iterdir())  # the pure wheel as holding none, unread
    assert read == sorted(sha.values())
    assert not list((tmp_path / "work").rglob("*.whl"))  # each read, then deleted
    for wheel in (user, old, pure):
        wheel.unlink()  # gone from the index: the cache answers, even offline
    assert native_link_gaps(lock, LinkCheck(settings, tmp_path / "work2", cache)) == [said]
    offline = LinkCheck(settings, tmp_path / "work3", cache, offline=True)
    assert native_link_gaps(lock, offline) == [said]
    (cache / f"{sha[old.name]}.json").unlink()
    assert native_link_gaps(lock, offline)[-1] == (
        "not checked here: the native libraries of greet-old 1.0 (offline, and not read by an "
        "earlier check)"
    )


def test_lock_check_links_fails_a_lock_whose_library_does_not_link(
    built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command: its report names the library and the lock is stale; `--links` alone (no
    `--check`) is refused as bad input."""
    links = tmp_path / "links"
    links.mkdir()
    user = wheel_of(links, "greet_user", {"greet_user/libuser.so": built.user})
    old = wheel_of(links, "greet_old", {f"greet_old/lib/{SONAME}": built.old})
    folder = tmp_path / "lockfiles"
    (folder / "cpu").mkdir(parents=True)
    lock_of(tmp_path, [user, old])
    (tmp_path / "native.lock.yaml").rename(folder / "cpu" / "cpu-linux-64.lock.yaml")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "no-index").as_uri())
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    run = run_cli(["lock", "--check", "--links", "--dir", str(folder), "--json"])
    assert run.code == EXIT_STEP_FAILED, run.stderr
    [entry] = run.body["lockfiles"]
    assert entry["native_links"] == [
        "greet_user/libuser.so (greet-user 1.0) needs wave at version GREET_1 of libgreet.so.1, "
        "which greet-old 1.0 does not define: loading it fails with `undefined symbol`"
    ]
    # (the lock, cut down to two wheels, lacks verl's cpu extras too: said beside)
    assert entry["stale"].endswith("1 native link failure(s)"), entry
    refused = run_cli(["lock", "--links", "--profile", "cpu"])
    assert refused.code == EXIT_BAD_INPUT and "--links is a part of --check" in refused.stderr
