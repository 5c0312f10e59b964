"""Credentials stay with the host they were given for: a redirect to another host:port drops them.

Two real loopback servers on two ports: the first holds the credentials' host and answers 302
to the second, which records the headers it is sent. A URL's `user:password@` and the user's
netrc both stay on the first; a redirect within the first host keeps them (so the check can
tell the two apart).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from verl_bootstrap.httpclient import download, fetch, status

BODY = b"schema_version: 1\n"


class _Server(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str | None]] = []  # (path, Authorization header)
        self.redirect_to = ""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return

    def _answer(self, body: bytes) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.path.startswith("/away/"):  # to the other server: another port
            self.send_response(302)
            self.send_header("Location", self.server.redirect_to + self.path[len("/away") :])
        elif self.path.startswith("/here/"):  # within this host and port
            self.send_response(302)
            self.send_header("Location", self.path[len("/here") :])
        else:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(BODY)

    def do_HEAD(self) -> None:
        self._answer(b"")


def _serve(httpd: _Server) -> None:
    threading.Thread(target=httpd.serve_forever, daemon=True).start()


@pytest.fixture
def pair() -> Iterator[tuple[_Server, _Server]]:
    first, second = _Server(), _Server()
    first.redirect_to = second.base
    for httpd in (first, second):
        _serve(httpd)
    yield first, second
    for httpd in (first, second):
        httpd.shutdown()
        httpd.server_close()


def _with_userinfo(base: str) -> str:
    return base.replace("http://", "http://alice:s3cret@")


def test_userinfo_is_not_sent_to_the_host_a_redirect_names(pair: tuple[_Server, _Server]) -> None:
    first, second = pair
    assert fetch(_with_userinfo(first.base) + "/away/site.yaml", environ={}) == BODY
    assert first.seen[0][1] is not None and first.seen[0][1].startswith("Basic ")
    assert second.seen == [("/site.yaml", None)]


def test_netrc_credentials_are_not_sent_to_the_host_a_redirect_names(
    pair: tuple[_Server, _Server], tmp_path: Path
) -> None:
    first, second = pair
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password s3cret\n")
    netrc.chmod(0o600)
    env = {"NETRC": str(netrc), "HOME": str(tmp_path)}
    assert status(first.base + "/away/simple/", environ=env, timeout=5) == 200
    assert first.seen[0][1] is not None
    assert second.seen == [("/simple/", None)]


def test_a_download_redirected_elsewhere_arrives_without_the_credentials(
    pair: tuple[_Server, _Server], tmp_path: Path
) -> None:
    first, second = pair
    dest = tmp_path / "x.whl"
    download(_with_userinfo(first.base) + "/away/x.whl", dest)
    assert dest.read_bytes() == BODY
    assert second.seen == [("/x.whl", None)]


def test_a_redirect_within_the_same_host_keeps_the_credentials(
    pair: tuple[_Server, _Server],
) -> None:
    first, _ = pair
    assert fetch(_with_userinfo(first.base) + "/here/site.yaml", environ={}) == BODY
    (_, before), (path, after) = first.seen
    assert path == "/site.yaml" and before is not None and after == before


def test_help_and_a_plan_that_probes_nothing_do_not_load_the_http_library() -> None:
    code = (
        "import sys\nfrom verl_bootstrap import cli\n"
        "for argv in (['--help'], ['plan', '--profile', 'fsdp', '--cuda', 'cu128']):\n"
        "    try:\n        cli.main(argv)\n    except SystemExit:\n        pass\n"
        "print('requests' in sys.modules, 'urllib3' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False False"
