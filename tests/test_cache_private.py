"""Per-user caches are private all the way down, tried as a hostile second user for real: the
lab mate is `nobody` (uid 65534, entered with setpriv; the tests run as root, as CI does), the
victim is the test's own user. Each attack of the review: a 0777 cache folder planted first in a
sticky shared folder (as /tmp is), a symlink swapped in for the bytecode store after the tool's
check, a verl sdist planted under the sdist cache's predictable key, and a symlink where `plan`
writes a lab lockfile it fetched (served on loopback)."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from loopback import base_url, serve
from scaffold import run_tool, with_env

from verl_bootstrap.errors import Refused
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import PROBES, cache_folder, private_folder, shared_path
from verl_bootstrap.source import fetch

REPO = Path(__file__).resolve().parents[1]
CPU_LOCK = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
NOBODY = 65534


@pytest.fixture(autouse=True)
def _two_real_users() -> None:
    """Two real users need root (to become the second one with setpriv), as CI runs: only a
    missing GPU skips a test."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail("run as root with setpriv (util-linux), as CI does: a second user is needed")


def as_nobody(*argv: str) -> None:
    """Run `argv` as the lab mate, umask 0 (what she makes, anyone may write)."""
    subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "sh",
            "-c",
            'umask 0; exec "$@"',
            "sh",
            *argv,
        ],
        check=True,
        timeout=60,
    )


@pytest.fixture
def shared() -> Iterator[Path]:
    """A sticky folder everyone may write, as /tmp is (the lab mate reaches it too)."""
    path = Path(tempfile.mkdtemp(prefix="vb-sticky-", dir="/tmp"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path)


def test_a_cache_folder_another_user_made_first_is_refused_naming_it(shared: Path) -> None:
    planted = shared / "victim"
    as_nobody("mkdir", "-m", "0777", str(planted))
    cache = planted / "verl-bootstrap"
    assert "belongs to another user (uid 65534)" in (shared_path(planted) or "")
    with pytest.raises(Refused, match=r"is not private: .*victim belongs to another user"):
        cache_folder("sdists", environ={"VERL_BOOTSTRAP_CACHE": str(cache)})
    assert not cache.exists()  # nothing of the victim's written into her folder
    mine = shared / "mine"
    made = cache_folder("sdists", environ={"VERL_BOOTSTRAP_CACHE": str(mine / "vb")})
    for folder in (mine, mine / "vb", made):  # made 0700, each of them
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_a_folder_of_ones_own_that_others_can_write_is_refused_too(shared: Path) -> None:
    loose = shared / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    assert "is writable by others (mode 777)" in (private_folder(loose / "vb") or "")
    assert "is writable by others" in (private_folder(loose) or "")


def test_plan_does_not_write_a_fetched_lab_lockfile_through_a_planted_symlink(
    shared: Path, tmp_path: Path
) -> None:
    """The lab mate made the victim's cache folder first and planted a link where `plan` keeps
    the lab's lockfile it fetched; on main, `write_bytes` followed it into the victim's file."""
    precious = tmp_path / "home" / ".bashrc"
    precious.parent.mkdir()
    precious.write_text("# the victim's own\n")
    cache = shared / "victim-cache"
    as_nobody("mkdir", "-p", "-m", "0777", str(cache / "lab-lockfiles"))
    link = cache / "lab-lockfiles" / "cpu-cpu-linux-64.lock.yaml"
    as_nobody("ln", "-s", str(precious), str(link))
    done = _plan_with_the_labs_lockfile(tmp_path, cache)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"the cache folder {cache}/lab-lockfiles is not private" in done.stderr
    assert precious.read_text() == "# the victim's own\n"


def test_a_link_at_the_lab_lockfiles_name_in_ones_own_cache_is_replaced_not_followed(
    tmp_path: Path,
) -> None:
    precious = tmp_path / "precious"
    precious.write_text("keep\n")
    cache = tmp_path / "cache"
    folder = cache_folder("lab-lockfiles", environ={"VERL_BOOTSTRAP_CACHE": str(cache)})
    (folder / "cpu-cpu-linux-64.lock.yaml").symlink_to(precious)
    done = _plan_with_the_labs_lockfile(tmp_path, cache)
    assert done.returncode == 0, done.stderr
    assert precious.read_text() == "keep\n"
    kept = folder / "cpu-cpu-linux-64.lock.yaml"
    assert not kept.is_symlink() and kept.read_bytes() == CPU_LOCK.read_bytes()


def _planted_release(cache: Path, settings: IndexSettings) -> Path:
    """What the lab mate plants under the sdist cache's predictable key for verl 0.9.1: a
    pointer naming her archive by its own (correct) sha256."""
    archive = b"her setup.py runs at install\n"
    import hashlib  # noqa: PLC0415 - this helper's alone

    sha = hashlib.sha256(archive).hexdigest()
    key = json.dumps(["0.9.1", settings.index_url, list(settings.extra_index_urls)])
    pointer = cache / "sdists" / "releases" / hashlib.sha256(key.encode()).hexdigest()[:16]
    as_nobody("mkdir", "-p", "-m", "0777", str(pointer.parent), str(cache / "sdists" / sha))
    as_nobody("sh", "-c", f"printf '{sha} verl-0.9.1.tar.gz\\n' > {pointer}")
    as_nobody(
        "sh", "-c", f"printf '{archive.decode()[:-1]}\\n' > {cache}/sdists/{sha}/verl-0.9.1.tar.gz"
    )
    return cache / "sdists" / sha / "verl-0.9.1.tar.gz"


def test_a_verl_sdist_planted_under_the_caches_key_is_never_taken(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = IndexSettings(index_url="https://lab.example/simple")
    cache = shared / "victim-cache"
    planted = _planted_release(cache, settings)
    assert planted.is_file()
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(cache))
    with pytest.raises(Refused, match="is not private"):  # on main: her archive, taken
        fetch._cached_release(fetch._release_pointer("0.9.1", settings))


def test_a_planted_sdist_in_ones_own_cache_folder_is_not_taken(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files in a private folder that are not the user's own (copied in by another, say) are
    not taken either."""
    settings = IndexSettings(index_url="https://lab.example/simple")
    staging = shared / "staging"
    planted = _planted_release(staging, settings)
    cache = tmp_path / "cache"
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(cache))
    pointer = fetch._release_pointer("0.9.1", settings)
    archive = cache_folder("sdists", planted.parent.name) / planted.name
    for source, dest in (
        (planted.parents[1] / "releases" / pointer.name, pointer),
        (planted, archive),
    ):
        shutil.copy2(source, dest)
        os.chown(dest, NOBODY, NOBODY)
    assert fetch._cached_release(pointer) is None
    for dest in (pointer, archive):
        os.chown(dest, 0, 0)
        dest.chmod(0o644)
    assert fetch._cached_release(pointer) == archive  # the user's own files: taken


def _store_with_entry(root: Path) -> tuple[Path, Path]:
    """A store laid out as the probe lays it out, holding one entry for a source file of a
    tiny package; (the source, the entry)."""
    package = root / "pkg"
    package.mkdir(parents=True)
    source = package / "mod.py"
    source.write_text("VALUE = 'the env'\n")
    store = root / "store"
    store.mkdir(mode=0o700)  # the tool makes and checks it before it runs the probe
    answer = _probe("harvest", store, [str(package)], compile_first=source)
    assert answer.get("stored") == 1, answer
    (entry,) = store.rglob("*.pyc")
    return source, entry


def _bare_python(base: Path) -> str:
    """An empty venv's interpreter (its site-packages holds no RECORD: only the given trees)."""
    venv = base / "venv"
    if not venv.exists():
        subprocess.run(
            [uv_binary(), "venv", "-q", "--python", sys.executable, str(venv)], check=True
        )
    return str(venv / "bin" / "python")


def _probe(
    mode: str, store: Path, trees: list[str], compile_first: Path | None = None
) -> dict[str, object]:
    python = _bare_python(Path(trees[0]).parents[1])  # beside the tree: the test's own folder
    if compile_first is not None:
        compile_it = f"import py_compile; py_compile.compile({str(compile_first)!r})"
        subprocess.run([python, "-c", compile_it], check=True)
    request = json.dumps({"mode": mode, "store": str(store), "trees": trees})
    done = subprocess.run(
        [python, "-I", str(PROBES / "bytecode.py"), request],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("@@BYTECODE@@"))
    answer: dict[str, object] = json.loads(line.removeprefix("@@BYTECODE@@"))
    return answer


def test_the_bytecode_probe_never_uses_a_store_swapped_for_a_link_to_another_users(
    shared: Path, tmp_path: Path
) -> None:
    """Between the tool's check and the probe's use the lab mate swaps the store for a link to
    hers (holding her pyc for the victim's source): the probe opens the store itself, without
    following a link, and checks whose it is."""
    source, entry = _store_with_entry(tmp_path / "hers")
    entry.chmod(0o644)
    entry.write_bytes(entry.read_bytes()[:16] + entry.read_bytes()[16:])  # her pyc, valid
    theirs = shared / "hers"
    shutil.copytree(tmp_path / "hers" / "store", theirs)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(theirs)], check=True)
    store = tmp_path / "mine" / "store"
    store.parent.mkdir()
    store.symlink_to(theirs)  # the swap: the checked folder's name now links to hers
    pycache = source.parent / "__pycache__"
    shutil.rmtree(pycache)
    answer = _probe("restore", store, [str(source.parent)])
    assert "not used" in str(answer.get("error")), answer
    assert not pycache.exists() or not any(pycache.iterdir())  # nothing of hers restored
    store.unlink()
    store.symlink_to(tmp_path / "hers" / "store")  # a link even to one's own: not followed
    assert "not used" in str(_probe("restore", store, [str(source.parent)]).get("error"))
    direct = _probe("restore", theirs, [str(source.parent)])  # her folder, named directly
    assert "another user's" in str(direct.get("error")), direct
    mine = _probe("restore", tmp_path / "hers" / "store", [str(source.parent)])
    assert mine.get("restored") == 1, mine  # the user's own store still serves


def test_a_group_writable_folder_of_the_users_own_private_group_is_private(
    tmp_path: Path,
) -> None:
    """Systems with umask 002 give each user a group of their own, so their ~/.cache is 0775
    and still only theirs: used. The same mode with a group another user is in: refused."""
    me = pwd.getpwuid(os.geteuid())
    own = grp.getgrgid(me.pw_gid)
    assert own.gr_name == me.pw_name and not set(own.gr_mem) - {me.pw_name}  # root's is root
    home_cache = tmp_path / "home" / ".cache"
    home_cache.mkdir(parents=True)
    home_cache.chmod(0o775)  # as umask 002 makes it
    assert private_folder(home_cache / "verl-bootstrap") is None
    shared_group = grp.getgrgid(NOBODY).gr_gid  # a group the lab mate is in
    os.chown(home_cache, -1, shared_group)
    why = private_folder(home_cache / "verl-bootstrap" / "more")
    assert why is not None and "writable by others (mode 775)" in why


def _plan_with_the_labs_lockfile(tmp_path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """`plan --profile cpu` with a site config whose `lockfiles:` serves the cpu lock over loopback,
    the tool's cache at `cache`."""
    served = tmp_path / "served" / "cpu"
    served.mkdir(parents=True)
    shutil.copyfile(CPU_LOCK, served / "cpu-linux-64.lock.yaml")
    server = serve(tmp_path / "served")
    try:
        site = tmp_path / "site.yaml"
        site.write_text(yaml.safe_dump({"schema_version": 1, "lockfiles": base_url(server)}))
        return run_tool(
            "plan",
            "--profile",
            "cpu",
            "--config",
            site,
            env=with_env(VERL_BOOTSTRAP_CACHE=str(cache), PYTHONDONTWRITEBYTECODE="1"),
            timeout=300,
        )
    finally:
        server.shutdown()
