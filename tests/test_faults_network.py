"""Faults lose nothing, part two: the network cut mid-download, and a half-unpacked source.

A real loopback HTTP server sends part of a file and drops the connection: the `--locked`
download (lock/installing/lockedsteps.py) and a site config fetched by URL end in a clear message,
leave no half-written file where it would be trusted, and a re-run against a server that sends
the whole file completes. verl's sdist is unpacked beside its checkout and renamed into place: a
truncated archive, or a real SIGKILL in the middle of the unpack, never leaves a half-unpacked
checkout, and the re-run redoes it.
"""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from scaffold import tool_argv

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.download import cached_archive, fetch_checked
from verl_bootstrap.source.sdist import unpack_sdist
from verl_bootstrap.source.sourcework import SDIST_MARK

PAYLOAD = os.urandom(256 * 1024)
SHA = hashlib.sha256(PAYLOAD).hexdigest()
CONFIG = b"schema_version: 1\ndefaults:\n  profile: cpu\n" + b"# padding\n" * 2000


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        body = CONFIG if self.path.endswith(".yaml") else PAYLOAD
        mode = self.server.mode
        self.send_response(200)
        if mode != "cut-no-length":
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body if mode == "whole" else body[: len(body) // 3])
        self.wfile.flush()
        self.close_connection = True  # the rest never comes


class _Server(ThreadingHTTPServer):
    mode = "whole"


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _url(httpd: _Server, name: str) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/{name}"


def test_a_cut_download_raises_clearly_and_leaves_no_file(server: _Server, tmp_path: Path) -> None:
    server.mode = "cut"
    dest = tmp_path / "x.whl"
    with pytest.raises(HttpError, match="dropped mid-transfer"):
        download(_url(server, "x.whl"), dest)
    assert list(tmp_path.iterdir()) == []  # neither the file nor its .part


@pytest.mark.parametrize("mode", ["cut", "cut-no-length"])
def test_a_locked_download_cut_midway_keeps_nothing_and_a_rerun_completes(
    server: _Server, tmp_path: Path, mode: str
) -> None:
    """With a length the cut is seen; without one the short file fails its locked sha256."""
    artifact = Artifact(url=_url(server, "pkg-1.0.tar.gz"), sha256=SHA, kind="sdist")
    dest = cached_archive(tmp_path / "cache", SHA, "pkg-1.0.tar.gz")
    server.mode = mode
    reason = "could not download .*dropped" if mode == "cut" else "does not have the locked sha256"
    with pytest.raises(StepFailed, match=reason):
        fetch_checked(artifact, dest, SHA)
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []
    server.mode = "whole"
    fetch_checked(artifact, dest, SHA)
    assert dest.read_bytes() == PAYLOAD


def test_a_site_config_fetch_cut_midway_is_a_clear_error_and_a_rerun_works(
    server: _Server, tmp_path: Path
) -> None:
    env = {**os.environ, "VERL_BOOTSTRAP_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    argv = tool_argv("config", "show", "--config")
    argv.append(_url(server, "lab.yaml"))
    server.mode = "cut"
    cut = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert cut.returncode == 2, cut.stderr
    assert "cannot fetch site config" in cut.stderr and "dropped mid-transfer" in cut.stderr
    assert "Traceback" not in cut.stderr + cut.stdout
    server.mode = "whole"
    whole = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert whole.returncode == 0, whole.stderr


def _sdist(folder: Path, files: int = 400) -> Path:
    """A release-sdist-shaped archive with many files (so an unpack takes a moment)."""
    archive = folder / "verl-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for number in range(files):
            data = f"VALUE = {number}\n".encode()
            info = tarfile.TarInfo(f"verl-1.0/verl/m{number}.py")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def test_a_truncated_sdist_is_refused_and_nothing_half_unpacked_remains(tmp_path: Path) -> None:
    whole = _sdist(tmp_path)
    cut = tmp_path / "cut" / whole.name
    cut.parent.mkdir()
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    checkout = tmp_path / "env" / "src" / "verl"
    with pytest.raises(StepFailed, match="could not be unpacked"):
        unpack_sdist(cut, checkout, "0" * 64)
    assert not checkout.exists() and list(checkout.parent.iterdir()) == []
    unpack_sdist(whole, checkout, "1" * 64)
    assert len(list((checkout / "verl").iterdir())) == 400
    assert (checkout / SDIST_MARK).read_text() == f"{whole.name} {'1' * 64}\n"


# A child that unpacks, pausing halfway through the members so the test can SIGKILL it there.
_CHILD = """
import sys, time, tarfile
from pathlib import Path
from verl_bootstrap.source import sdist as source
real = tarfile.TarFile.extractall
def halfway(self, path, members, **kw):
    real(self, path, members=members[: len(members) // 2], **kw)
    Path(sys.argv[3]).write_text("halfway")
    time.sleep(60)
tarfile.TarFile.extractall = halfway
source.unpack_sdist(Path(sys.argv[1]), Path(sys.argv[2]), "2" * 64)
"""


def test_sigkill_during_an_unpack_leaves_no_checkout_and_the_rerun_redoes_it(
    tmp_path: Path,
) -> None:
    archive = _sdist(tmp_path)
    checkout, flag = tmp_path / "env" / "src" / "verl", tmp_path / "halfway"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(archive), str(checkout), str(flag)])
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert flag.exists(), "the child never reached the middle of its unpack"
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    staging = checkout.with_name(f".{checkout.name}.unpacking")
    assert not checkout.exists()  # the checkout a re-run would trust does not exist
    assert 0 < len(list((staging / "verl").iterdir())) < 400  # only the staging folder is half
    unpack_sdist(archive, checkout, "2" * 64)
    assert len(list((checkout / "verl").iterdir())) == 400 and not staging.exists()
    assert (checkout / SDIST_MARK).is_file()
