"""The env's state file and its prefix lock, with another real process holding it: a run refused,
and the lock queued for with --wait (a real install queued so: test_lock_route.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefixholder import Holder, released_at

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_REFUSED, InputError, PrefixBusy
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.run.state.guard import guarding
from verl_bootstrap.run.state.state import State, StepRecord

DATA = Path(__file__).parent / "data" / "profiles"

# --- state -------------------------------------------------------------------------------------


def test_a_missing_state_file_is_an_empty_state(tmp_path: Path) -> None:
    state = State.load(tmp_path / "state.json")
    assert state.steps == {}
    assert state.protected == {}
    assert not state.is_done("create-env", "0" * 16)
    assert state.outputs("create-env") == {}


def test_state_round_trips_steps_outputs_and_protected_packages(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state.json"
    state = State(path=path)
    state.steps["fetch-source"] = StepRecord(
        status="done",
        fingerprint="f" * 16,
        started=1.0,
        finished=2.0,
        log="/x.log",
        outputs={"commit": "abc"},
    )
    state.steps["torch"] = StepRecord(status="running", fingerprint="a" * 16, started=3.0)
    state.protected = {"torch": {"version": "2.13.0+cpu", "record": "r", "stage": "torch"}}
    state.save()
    loaded = State.load(path)
    assert loaded.steps == state.steps
    assert loaded.protected == state.protected
    assert loaded.is_done("fetch-source", "f" * 16)
    assert not loaded.is_done("fetch-source", "e" * 16)  # other inputs: not done
    assert not loaded.is_done("torch", "a" * 16)  # running is not done
    assert loaded.outputs("fetch-source") == {"commit": "abc"}
    body = json.loads(path.read_text(encoding="utf-8"))
    assert body["version"] == 1
    assert list(body["steps"]) == ["fetch-source", "torch"]  # sorted, stable diffs


def test_a_corrupt_state_file_is_an_input_error_saying_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        State.load(path)
    assert raised.value.data == {"file": str(path), "reason": "unreadable"}
    assert "delete that file" in (raised.value.hint or "")


def test_a_state_file_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 99, "steps": {}}), encoding="utf-8")
    with pytest.raises(InputError) as raised:
        State.load(path)
    assert raised.value.data == {"file": str(path), "reason": "version", "version": 99}


def test_atomic_write_replaces_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "file.txt"
    atomic_write(path, "one\n")
    atomic_write(path, "two\n")
    assert path.read_text(encoding="utf-8") == "two\n"
    assert [p.name for p in path.parent.iterdir()] == ["file.txt"]


# A real process writes with a limit on how large a file it may write (RLIMIT_FSIZE), so the
# write stops part-way as on a full disk: with the limit's error (EFBIG, SIGXFSZ ignored, as Python
# starts) or killed by its signal (SIGXFSZ's default action), mid-write.
_CUT_WRITE = """
import resource, signal, sys
from pathlib import Path
from verl_bootstrap.errors import CannotWrite
from verl_bootstrap.paths import atomic_write

path, how, limit = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
write = atomic_write if sys.argv[4:] != ["in-place"] else Path.write_bytes
if how == "killed":
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    write(path, b"new\\n" * (1 << 18))
except CannotWrite as exc:
    print(exc.message)
    sys.exit(3)
"""


@pytest.mark.parametrize("how", ["error", "killed"])
def test_a_failed_atomic_write_keeps_the_old_file_whole(tmp_path: Path, how: str) -> None:
    """A write of 1 MiB cut at 64 KiB, by an error or by the process's death: the file holds
    its old bytes, every one; an error says which file, and leaves no temp file behind."""
    path = tmp_path / "state.json"
    old = b"old\n" * 4096
    atomic_write(path, old)
    done = subprocess.run(
        [sys.executable, "-c", _CUT_WRITE, str(path), how, str(64 << 10)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert path.read_bytes() == old
    if how == "killed":
        assert done.returncode == -signal.SIGXFSZ, done.stderr
        return
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == f"cannot write {path}: File too large"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.parametrize("how", ["error", "killed"])
def test_the_cut_write_breaks_a_file_written_in_place(tmp_path: Path, how: str) -> None:
    """The test above can fail: the same cut, on a plain write into the file itself, leaves the
    file neither old nor new (its first 64 KiB only)."""
    path = tmp_path / "state.json"
    path.write_bytes(b"old\n" * 4096)
    argv = [sys.executable, "-c", _CUT_WRITE, str(path), how, str(64 << 10), "in-place"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0, done.stderr
    assert path.read_bytes() == b"new\n" * (1 << 14)


# --- the prefix lock ---------------------------------------------------------------------------


def test_the_lock_records_its_holder_and_is_released_after_the_block(tmp_path: Path) -> None:
    lock = tmp_path / "state" / "lock"
    with guarding(lock):
        info = json.loads(lock.read_text(encoding="utf-8"))
        assert info["pid"] == os.getpid()
        assert info["host"]
    with guarding(lock):  # released: it can be taken again
        pass


def test_a_second_holder_is_refused_after_waiting(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with guarding(lock), pytest.raises(PrefixBusy) as raised, guarding(lock, wait=0.6):
        pass
    holder = raised.value.data["holder"]
    assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
    assert "--wait SECONDS" in (raised.value.hint or "")
    assert raised.value.exit_code == EXIT_REFUSED


def test_the_lock_is_released_when_the_block_raises(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with pytest.raises(RuntimeError), guarding(lock):
        raise RuntimeError("a step blew up")
    with guarding(lock):
        pass


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Holder]:
    holding_process = Holder(tmp_path / "env")
    yield holding_process
    holding_process.stop()


def light_profile(tmp_path: Path) -> Path:
    folder = Path(shutil.copytree(DATA / "light", tmp_path / "light"))
    return folder / "light.yaml"


def test_a_second_install_into_a_locked_prefix_exits_3_naming_the_holder(
    holder: Holder,
    tmp_path: Path,
    verl_repo_session: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    prefix = holder.prefix
    child = holder.start(60)
    argv = [
        "--profile",
        str(light_profile(tmp_path)),
        "--prefix",
        str(prefix),
        "--verl-source",
        str(verl_repo_session),
        "--json",
    ]
    assert cli.main(argv) == EXIT_REFUSED
    captured = capsys.readouterr()
    assert "error: another verl-bootstrap run is installing into this env" in captured.err
    assert f"pid {child.pid} on " in captured.err
    assert "--wait SECONDS" in captured.err
    body = json.loads(captured.out)
    assert body["ok"] is False
    assert body["error"]["exit_code"] == EXIT_REFUSED
    # refused before any step ran: only the lock file exists
    assert sorted(p.name for p in prefix.rglob("*")) == [".verl-bootstrap", "lock"]


def test_with_wait_the_lock_queues_behind_a_real_holder_then_is_taken(holder: Holder) -> None:
    # the prefix lock itself, behind another real process: taken only once that one let it go.
    # That `install --wait` reaches this lock and then runs every step is checked by the one real
    # install of test_lock_route.py, which queues behind a holder too.
    child = holder.start(2)
    lock = holder.prefix / ".verl-bootstrap" / "lock"
    with guarding(lock, wait=300):
        taken = time.time()
        assert json.loads(lock.read_text(encoding="utf-8"))["pid"] == os.getpid()
    assert taken >= released_at(child)  # nothing held it while the other process did
