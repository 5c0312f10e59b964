"""One wheelhouse folder, two real users: what one publishes the other lists, takes and plans with;
in a group-writable (setgid) folder the other publishes too, through the first one's lock file; a
user who cannot write uses the folder read-only and is told so, leaving nothing behind; a FIFO
named `.lock` is refused, not waited on.

The second user is `nobody` (uid 65534), entered with `setpriv`: the tests run as root, as CI does.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from scaffold import run_tool
from tinyenv import kernel_wheel

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED

NOBODY = 65534  # uid and gid (nogroup) of the second user
FLASH = "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
KEY = "torch=2.10.0,cuda=12.8,cxx11abi=TRUE,python=cp312,platform=linux_x86_64"
REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="two real users need root (to become the second one with setpriv), as in CI",
)


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder both users can reach (pytest's own temp folder is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="vb-shared-", dir="/tmp"))
    path.chmod(0o755)
    home = path / "home-b"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    yield path
    shutil.rmtree(path)


def tool(base: Path, *args: str, user: str) -> subprocess.CompletedProcess[str]:
    """`verl-bootstrap ARGS` as user "a" (root, umask 022) or "b" (nobody, its own home)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_BOOTSTRAP")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    prefix: tuple[str, ...] = ()
    if user == "b":
        prefix = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
        home = base / "home-b"
        env.update(
            HOME=str(home),
            VERL_BOOTSTRAP_HOME=str(home / ".vb"),
            XDG_CACHE_HOME=str(home / ".cache"),
        )
    return run_tool(*args, env=env, timeout=120, prefix=prefix, preexec=lambda: os.umask(0o022))


def a_wheel(base: Path, name: str) -> Path:
    """A kernel's wheel file the publisher has (readable by both), for the Python `name` says."""
    folder = base / "wheels"
    folder.mkdir(exist_ok=True)
    built = kernel_wheel(folder, "vbtiny", "1.0", python=name.split("-")[2])
    return built.rename(folder / name)


def add(base: Path, house: Path, wheel: Path, user: str) -> subprocess.CompletedProcess[str]:
    key = KEY.replace("python=cp312", f"python={wheel.name.split('-')[2]}")  # the wheel's own
    return tool(
        base, "wheelhouse", "add", str(wheel), "--key", key, "--wheelhouse", str(house), user=user
    )


def listed(base: Path, house: Path, user: str) -> list[str]:
    done = tool(base, "wheelhouse", "list", "--wheelhouse", str(house), "--json", user=user)
    assert done.returncode == EXIT_OK, done.stderr
    return sorted(w["file"] for w in json.loads(done.stdout)["wheels"])


def test_what_one_user_publishes_another_lists_takes_and_plans_with(base: Path) -> None:
    house = base / "house"
    house.mkdir(mode=0o755)  # the publisher's folder: others may read it, not write it
    published = add(base, house, a_wheel(base, FLASH), user="a")
    assert published.returncode == EXIT_OK, published.stderr
    for path in [house / FLASH, house / "index.json", house / ".lock"]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o004, f"{path.name} is not readable by others"

    assert listed(base, house, user="b") == [FLASH]
    shown = tool(base, "wheelhouse", "list", "--wheelhouse", str(house), user="b")
    assert f"wheelhouse {house}: 1 wheel(s) (read-only for you" in shown.stdout, shown.stderr
    taken = tool(base, "wheelhouse", "check", "--wheelhouse", str(house), user="b")
    assert taken.returncode == EXIT_OK, taken.stdout + taken.stderr  # every wheel read and rehashed

    site = base / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {house}\n", encoding="utf-8")
    plan = tool(
        base,
        "plan",
        "--profile",
        "fsdp",
        "--cuda",
        "cu128",
        "--config",
        str(site),
        user="b",
    )
    assert plan.returncode == EXIT_OK, plan.stdout + plan.stderr
    assert "prebuilt from the lab wheelhouse, built for torch 2.10.0+cu128" in plan.stdout

    refused = add(
        base, house, a_wheel(base, "flash_attn-2.8.4-cp312-cp312-linux_x86_64.whl"), user="b"
    )
    assert refused.returncode == EXIT_REFUSED, refused.stderr
    assert "is read-only for you: nothing was added" in refused.stderr
    assert sorted(p.name for p in house.iterdir()) == sorted([FLASH, "index.json", ".lock"])


def test_a_second_user_publishes_into_a_group_folder_through_the_first_ones_lock(
    base: Path,
) -> None:
    house = base / "group-house"
    house.mkdir()
    os.chown(house, 0, NOBODY)
    house.chmod(0o2775)  # the lab's group may write; setgid: new files get the lab's group
    first = add(base, house, a_wheel(base, FLASH), user="a")
    assert first.returncode == EXIT_OK, first.stderr
    assert (house / ".lock").stat().st_uid == 0  # the first user's lock file

    other = "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"
    second = add(base, house, a_wheel(base, other), user="b")
    assert second.returncode == EXIT_OK, second.stderr
    assert listed(base, house, user="a") == listed(base, house, user="b") == sorted([FLASH, other])
    for path in [house / other, house / "index.json"]:
        info = path.stat()
        assert (info.st_uid, info.st_gid) == (NOBODY, NOBODY)
        assert stat.S_IMODE(info.st_mode) & 0o044 == 0o044, f"{path.name}: not readable by all"


def test_a_fifo_named_lock_is_refused_not_waited_on(base: Path) -> None:
    house = base / "fifo-house"
    house.mkdir()
    os.mkfifo(house / ".lock")
    done = add(base, house, a_wheel(base, FLASH), user="a")  # a hang fails the run's timeout
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert f"the wheelhouse's lock {house / '.lock'} is not a regular file" in done.stderr
    assert sorted(p.name for p in house.iterdir()) == [".lock"]  # nothing copied in
