"""A folder on a loopback HTTP server: the release assets and index pages of a prebuilt source,
laid out as the real host lays them out."""

from __future__ import annotations

import functools
import http.server
import sys
import threading
import time
from pathlib import Path


class Server(http.server.ThreadingHTTPServer):
    """A loopback server whose clients may hang up mid-file (the tool refusing a file that is
    too large, say): that is no error of the server's, printed into another test's output."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        """No access log on the test's stderr."""


def serve(root: Path) -> Server:
    """`root` served on 127.0.0.1 at a free port from a daemon thread (the caller shuts it
    down)."""
    server = Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def base_url(server: Server) -> str:
    """The server's URL, with no trailing slash."""
    return f"http://127.0.0.1:{server.server_address[1]}"


def serve_wheelhouse(root: Path, distribution: str, asset: str) -> Server:
    """`root` served, as verl's wheelhouse lays itself out: a simple (PEP 503) index at
    verl-wheelhouse/simple/ whose page of `distribution` links the release asset at `asset`
    (a path under `root`); the base URL is written to root/base."""
    server = serve(root)
    base = base_url(server)
    page = root / "verl-wheelhouse" / "simple" / distribution / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="{base}/{asset}">{asset.rsplit("/", 1)[-1]}</a>\n')
    (root / "base").write_text(base)
    return server


class RangeServer(http.server.ThreadingHTTPServer):
    """One file on a loopback server that honours Range requests (`If-Range` by its ETag), and
    may drop its first `drops` answers after `cut` bytes, ignore Range (`ranges` False), serve
    the rest of a resumed file corrupted, or put `release` (a new file and its ETag) in place
    once an answer was dropped. Each request is kept: (its Range, its If-Range, the status
    answered, the bytes sent)."""

    def __init__(self, body: bytes) -> None:
        super().__init__(("127.0.0.1", 0), _RangeHandler)
        self.body, self.etag = body, '"v1"'
        self.drops, self.cut = 0, 0
        self.ranges, self.corrupt = True, False
        self.release: tuple[bytes, str] | None = None
        self.pace = 0.0  # seconds between 64 KiB pieces: a slow link
        self.stall = 0.0  # seconds of silence after the headers: a server that went quiet
        self.seen: list[tuple[str | None, str | None, int, int]] = []

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/flash_attn-2.8.3-cp312-linux_x86_64.whl"

    def start_of(self, asked: str | None, if_range: str | None) -> int:
        """Where an answer to `asked` starts: the Range's first byte when it is honoured."""
        if not asked or not self.ranges or if_range not in (None, self.etag):
            return 0
        return int(asked.removeprefix("bytes=").rstrip("-"))

    def dropped(self) -> None:
        """An answer was cut: one drop fewer, and the new release (if any) in place."""
        self.drops -= 1
        if self.release is not None:
            (self.body, self.etag), self.release = self.release, None


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    server: RangeServer

    def log_message(self, *args: object) -> None:
        """No access log on the test's stderr."""

    def do_GET(self) -> None:
        server = self.server
        asked, if_range = self.headers.get("Range"), self.headers.get("If-Range")
        if not self.path.endswith(".whl"):  # the one file it serves
            server.seen.append((asked, if_range, 404, 0))
            self.send_error(404)
            return
        start, size = server.start_of(asked, if_range), len(server.body)
        part = server.body[start:]
        if start and server.corrupt:
            part = bytes(b ^ 0xFF for b in part)
        length, status, etag = len(part), 206 if start else 200, server.etag
        if server.drops:
            part, self.close_connection = part[: server.cut], True  # the rest never comes
            server.dropped()
        server.seen.append((asked, if_range, status, len(part)))
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("ETag", etag)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        time.sleep(server.stall)
        self._send(part, server.pace)

    def _send(self, part: bytes, pace: float) -> None:
        for at in range(0, len(part), 1 << 16):
            self.wfile.write(part[at : at + (1 << 16)])
            time.sleep(pace)
        self.wfile.flush()


def serve_ranges(body: bytes) -> RangeServer:
    """`body` served by a RangeServer from a daemon thread (the caller shuts it down)."""
    server = RangeServer(body)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
