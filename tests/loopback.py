"""A folder on a loopback HTTP server: the release assets and index pages of a prebuilt source,
laid out as the real host lays them out."""

from __future__ import annotations

import functools
import http.server
import sys
import threading
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
