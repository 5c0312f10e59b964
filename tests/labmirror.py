"""A lab's mirror, made for real in the tests: a wheel folder, a PEP 503 index, a git mirror, HTTP.

The wheels the cpu profile needs (and the tool's own dependencies, for the onboarding script) are
`pip download`-ed once into the test cache and reused; CPU torch comes from this machine's
find-links folder. `LabServer` serves them, and a bare git mirror of the local verl repo, over
HTTP on loopback behind basic auth, so tests can prove which URLs a run used and that the
credentials in those URLs never leak.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from verlrepo import CACHE, filling, git

MIRROR_VERSION = 2  # 2: argcomplete, a dependency of the tool
# What the cpu profile installs (torch, verl's deps, its extra packages), what an editable build
# of verl needs, and what `pip install verl-bootstrap` needs.
REQUIREMENTS = (
    "torch==2.13.0",
    "verl==0.9.1",
    "cachetools",
    "uvicorn",
    "fastapi",
    "setuptools>=68",
    "wheel",
    "pydantic>=2.7,<3",
    "PyYAML>=6",
    "GitPython>=3.1.40",
    "py-rattler>=0.20",
    "uv>=0.9",
    "packaging>=24",
    "requests>=2.31",
    "argcomplete>=3.5",
)
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-")
_JSON = "application/vnd.pypi.simple.v1+json"


def _upload_time(path: Path, known: dict[str, str]) -> str:
    """When the file was uploaded (PEP 700): as PyPI says where known, else its mtime here."""
    if path.name in known:
        return known[path.name]
    stamp = datetime.datetime.fromtimestamp(path.stat().st_mtime, tz=datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def mirror_wheels() -> Path:
    """The wheel folder (downloaded once, then cached across test runs)."""
    target = CACHE / f"lab-mirror-v{MIRROR_VERSION}"
    with filling(target.name):
        if (target / ".complete").exists():
            _keep_local_times(target)
            return target
        return _fill_mirror(target)


def _fill_mirror(target: Path) -> Path:
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--dest", str(partial), *REQUIREMENTS],
        check=True,
    )
    _keep_local_times(partial)
    (partial / ".complete").write_text("ok\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def _keep_local_times(folder: Path) -> None:
    """A wheel pip copied from this machine's find-links folder (CPU torch) keeps that file's time.

    The index does not know such a file, so the mirror serves its mtime as its upload time, and a
    lock's cutoff (uv's exclude-newer) is compared with it: the copy's mtime is the day the mirror
    was filled, which would put the file after every fixed cutoff on a fresh machine.
    """
    for links in _find_links():
        for source in Path(links).glob("*.whl"):
            copy = folder / source.name
            if copy.is_file():
                stamp = source.stat().st_mtime
                os.utime(copy, (stamp, stamp))


def _find_links() -> list[str]:
    """The find-links folders this machine's pip is configured with (where CPU torch lies)."""
    shown = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    found = [*re.findall(r"find-links='([^']*)'", shown), os.environ.get("PIP_FIND_LINKS", "")]
    return sorted({part for value in found for part in value.split() if Path(part).is_dir()})


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def canonical(name: str) -> str:
    """PEP 503 name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_of(filename: str) -> str:
    """The project a wheel or sdist file belongs to."""
    if filename.endswith(".whl"):
        found = _WHEEL_NAME.match(filename)
        return canonical(found["name"] if found else filename)
    stem = filename.removesuffix(".tar.gz").removesuffix(".zip")
    return canonical(stem.rsplit("-", 1)[0])  # an sdist's name may hold hyphens


def git_mirror(repo: Path, dest: Path) -> Path:
    """A bare mirror of `repo` (as a lab would keep of github.com/verl-project/verl)."""
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(repo), str(dest)], check=True, capture_output=True
    )
    git(dest, "config", "http.receivepack", "false")
    git(dest, "update-server-info")
    return dest


class _Handler(BaseHTTPRequestHandler):
    server: LabHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def _serve(self) -> None:
        if self.headers.get("Authorization") != self.server.auth_header:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="lab"')
            self.end_headers()
            return
        self.server.requests.append(self.path)
        path = self.path.split("?", 1)[0]
        if path.startswith("/git/"):
            self._git(path)
        elif path.startswith("/simple"):
            self._simple(path.removeprefix("/simple").strip("/"))
        elif path.rstrip("/") == "/files":
            self._listing()
        elif path.startswith("/files/"):
            self._file(self.server.files().get(Path(path).name, Path("/nonexistent")))
        elif path.startswith("/site/"):
            self._file(self.server.site / Path(path).name)
        else:
            self.send_error(404)

    def _simple(self, project: str) -> None:
        """PEP 503 HTML, or PEP 691 JSON with hashes and upload times (uv's --exclude-newer)."""
        files = self.server.files()
        names = sorted(f for f in files if not project or project_of(f) == canonical(project))
        if project and not names:
            self.send_error(404)
            return
        if "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
            self._send(json.dumps(self._project_json(project, names)).encode(), _JSON)
            return
        if project:
            links = [
                f'<a href="/files/{html.escape(n)}#sha256={self.server.sha256(files[n])}">'
                f"{html.escape(n)}</a>"
                for n in names
            ]
        else:
            links = [
                f'<a href="/simple/{p}/">{p}</a>' for p in sorted({project_of(f) for f in files})
            ]
        self._send(("<html><body>" + "<br>".join(links) + "</body></html>").encode(), "text/html")

    def _listing(self) -> None:
        """A flat page of every file: what pip's and uv's --find-links read."""
        files = self.server.files()
        links = [
            f'<a href="/files/{html.escape(n)}#sha256={self.server.sha256(p)}">{html.escape(n)}</a>'
            for n, p in sorted(files.items())
        ]
        self._send(("<html><body>" + "<br>".join(links) + "</body></html>").encode(), "text/html")

    def _project_json(self, project: str, names: list[str]) -> dict[str, object]:
        files = self.server.files()
        if not project:
            projects = sorted({project_of(f) for f in files})
            return {"meta": {"api-version": "1.1"}, "projects": [{"name": p} for p in projects]}
        entries = [
            {
                "filename": name,
                "url": f"/files/{name}",
                "hashes": {"sha256": self.server.sha256(files[name])},
                "upload-time": _upload_time(files[name], self.server.upload_times),
            }
            for name in names
        ]
        return {"meta": {"api-version": "1.1"}, "name": canonical(project), "files": entries}

    def _file(self, path: Path) -> None:
        if not path.is_file():
            self.send_error(404)
            return
        self._send(path.read_bytes(), "application/octet-stream")

    def _git(self, path: str) -> None:
        """Smart HTTP through `git http-backend` (shallow clones need it)."""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            **os.environ,
            "GIT_PROJECT_ROOT": str(self.server.git_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path.removeprefix("/git"),
            "QUERY_STRING": self.path.partition("?")[2],
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            "REMOTE_USER": "lab",
        }
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class LabHTTPServer(ThreadingHTTPServer):
    """The lab's mirror host: /simple (PEP 503), /files, /git (smart HTTP), /site (config files)."""

    daemon_threads = True

    def __init__(
        self,
        *,
        wheels: tuple[Path, ...],
        git_root: Path,
        site: Path,
        user: str,
        token: str,
        port: int = 0,
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.upload_times: dict[str, str] = {}
        for folder in wheels:
            if (folder / "upload-times.json").is_file():
                self.upload_times.update(json.loads((folder / "upload-times.json").read_text()))
        self.wheels = wheels
        self.git_root = git_root
        self.site = site
        self.user = user
        self.token = token
        self.auth_header = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()
        self.requests: list[str] = []
        self.hashes: dict[str, str] = {}

    def sha256(self, path: Path) -> str:
        """A file's sha256 (computed once)."""
        key = str(path)
        if key not in self.hashes:
            self.hashes[key] = sha256_file(path)
        return self.hashes[key]

    def files(self) -> dict[str, Path]:
        """Every wheel and sdist served, by file name."""
        return {
            p.name: p
            for folder in self.wheels
            for p in folder.iterdir()
            if not p.name.startswith(".")
        }

    def url(self, path: str = "", *, auth: bool = True) -> str:
        """A URL on this server (with the credentials in it, as a lab's config would hold)."""
        cred = f"{self.user}:{self.token}@" if auth else ""
        return f"http://{cred}127.0.0.1:{self.server_address[1]}/{path.lstrip('/')}"


def start_server(
    *,
    wheels: tuple[Path, ...],
    git_root: Path,
    site: Path,
    token: str,
    port: int = 0,
) -> LabHTTPServer:
    """Start the lab's mirror host in a daemon thread (it lives as long as the test process)."""
    server = LabHTTPServer(
        wheels=wheels, git_root=git_root, site=site, user="lab", token=token, port=port
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@contextmanager
def serving(
    *, wheels: tuple[Path, ...], git_root: Path, site: Path, token: str
) -> Iterator[LabHTTPServer]:
    """Run the lab's mirror host for the block."""
    server = start_server(wheels=wheels, git_root=git_root, site=site, token=token)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":  # warm the cache by hand: python tests/labmirror.py
    print(mirror_wheels())
