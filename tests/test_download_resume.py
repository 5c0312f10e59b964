"""A multi-GB download outlives a dropped connection: it is tried again, a bounded number of
times, and resumed where it stopped with a Range request (If-Range by the file's ETag); a server
that ignores Range, or whose file changed, gives the whole file and the download starts over
cleanly; the sha256 over the whole file is checked at the end; the live line hears its bytes.

A real loopback HTTP server (tests/loopback.py RangeServer) that honours Range and drops its
first answers part way through the file, as a flaky link does.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback import RangeServer, serve_ranges

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.events import Event, listening
from verl_bootstrap.httpclient import HttpError, download
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.download import cached_archive, fetch_checked

MIB = 1 << 20
PAYLOAD = os.urandom(3 * MIB)
SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def server() -> Iterator[RangeServer]:
    httpd = serve_ranges(PAYLOAD)
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def heard() -> Iterator[list[Event]]:
    """The events the download sends (the CLI's console would show them)."""
    events: list[Event] = []
    with listening(events.append):
        yield events


def test_a_download_cut_midway_resumes_where_it_stopped(
    server: RangeServer, tmp_path: Path, heard: list[Event]
) -> None:
    server.drops, server.cut = 1, MIB
    dest = tmp_path / "x.whl"
    download(server.url, dest)
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == SHA
    assert server.seen == [
        (None, None, 200, MIB),
        (f"bytes={MIB}-", '"v1"', 206, 2 * MIB),  # the rest only: resumed, not restarted
    ]
    notes = [e.message for e in heard if e.kind[0] == "note"]
    assert notes == [
        "download of flash_attn-2.8.3-cp312-linux_x86_64.whl stopped at 1.0 MB (the connection "
        "dropped mid-transfer (IncompleteRead)): resuming in 0.5 s"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.whl"]  # no .part left


def test_each_drop_resumes_from_where_that_answer_stopped(
    server: RangeServer, tmp_path: Path
) -> None:
    server.drops, server.cut = 3, MIB // 2
    dest = tmp_path / "x.whl"
    download(server.url, dest)
    assert dest.read_bytes() == PAYLOAD
    assert [(asked, status) for asked, _, status, _ in server.seen] == [
        (None, 200),
        (f"bytes={MIB // 2}-", 206),
        (f"bytes={MIB}-", 206),
        (f"bytes={3 * MIB // 2}-", 206),
    ]
    assert sum(sent for *_, sent in server.seen) == len(PAYLOAD)  # no byte fetched twice


def test_a_server_that_ignores_range_starts_the_file_over_cleanly(
    server: RangeServer, tmp_path: Path
) -> None:
    server.drops, server.cut, server.ranges = 1, MIB, False
    dest = tmp_path / "x.whl"
    download(server.url, dest)
    assert dest.read_bytes() == PAYLOAD  # the whole answer, not appended to the first part
    assert [status for _, _, status, _ in server.seen] == [200, 200]


def test_a_file_changed_on_the_server_is_fetched_whole_never_spliced(
    server: RangeServer, tmp_path: Path
) -> None:
    """If-Range names the first answer's ETag: the server's new file comes whole (200)."""
    newer = os.urandom(2 * MIB)
    server.drops, server.cut, server.release = 1, MIB, (newer, '"v2"')
    dest = tmp_path / "x.whl"
    download(server.url, dest)
    assert dest.read_bytes() == newer
    assert [(if_range, status) for _, if_range, status, _ in server.seen] == [
        (None, 200),
        ('"v1"', 200),
    ]


def test_a_corrupted_rest_is_refused_by_the_sha256_over_the_whole_file(
    server: RangeServer, tmp_path: Path
) -> None:
    """A locked sdist: its first part intact, the resumed rest corrupted on the way."""
    server.drops, server.cut, server.corrupt = 1, MIB, True
    artifact = Artifact(url=server.url, sha256=SHA, kind="sdist")
    dest = cached_archive(tmp_path / "cache", SHA, "pkg-1.0.tar.gz")
    with pytest.raises(StepFailed, match=f"does not have the locked sha256 {SHA}"):
        fetch_checked(artifact, dest, SHA)
    assert [status for _, _, status, _ in server.seen] == [200, 206]  # it was resumed
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []
    server.corrupt = False
    fetch_checked(artifact, dest, SHA)  # a re-run gets the right file
    assert dest.read_bytes() == PAYLOAD


def test_the_retries_are_bounded(server: RangeServer, tmp_path: Path) -> None:
    server.drops, server.cut = 99, MIB // 4
    with pytest.raises(HttpError, match="dropped mid-transfer"):
        download(server.url, tmp_path / "x.whl")
    assert len(server.seen) == 5  # the first try and four more
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_goes_quiet_before_a_byte_is_not_asked_again(
    server: RangeServer, tmp_path: Path
) -> None:
    """A stall with nothing sent is no dropped transfer: four more waits of `timeout` each
    would only make the failure slower."""
    server.stall = 3.0
    with pytest.raises(HttpError) as caught:
        download(server.url, tmp_path / "x.whl", timeout=0.5)
    assert caught.value.timed_out
    assert len(server.seen) == 1


def test_an_answer_that_is_no_drop_is_not_asked_again(tmp_path: Path) -> None:
    httpd = serve_ranges(PAYLOAD)
    try:
        with pytest.raises(HttpError, match="HTTP 404"):
            download(httpd.url.replace(".whl", ".missing"), tmp_path / "x.whl")
        assert [status for _, _, status, _ in httpd.seen] == [404]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_live_line_hears_the_bytes_as_they_come(
    server: RangeServer, tmp_path: Path, heard: list[Event]
) -> None:
    server.pace = 0.05  # 48 pieces of 64 KiB: about 2.5 s
    download(server.url, tmp_path / "x.whl")
    live = [e.message for e in heard if e.kind == ("live", "download")]
    assert live, heard
    assert live[0].startswith("flash_attn-2.8.3-cp312-linux_x86_64.whl: ")
    assert all(message.endswith(" of 3.1 MB") for message in live)
