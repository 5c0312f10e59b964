"""No credential in any child's command line, and none on disk or in output.

A real install against the lab's mirror, whose index and git mirror require the token (basic
auth): verl from the git mirror and one small package from the index. While it runs, every
process the install started is sampled from /proc: no command line may hold the token (each
tool gets it through its environment or a private netrc). Afterwards the logs, the state, the
env's lockfile, every export format and all output are scanned for it too.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from functools import partial
from pathlib import Path

import pytest
from labfixtures import TOKEN, clean_environ, lab, lab_config, write_yaml
from scaffold import TOOL

from verl_bootstrap.safety.credentials import lift, split_url

pytestmark = pytest.mark.timeout(600)
QUERY_TOKEN = "q5ecret-query-token-91be"  # a secret in an index URL's query string

PROFILE = {
    "schema_version": 1,
    "name": "authed",
    "description": "verl and one small package, from a mirror that needs a password",
    "env": {"backend": "venv"},
    "cuda_variants": {"cpu": {"description": "no CUDA"}},
    "stages": [{"id": "small", "packages": ["cachetools"]}],
    "verify": {"imports": ["cachetools"], "gpu_smoke": False},
    "disk_gb": 0.1,  # verl without its dependencies: a few MB
}


def descendants(root: int) -> set[int]:
    """`root` and every process below it, from /proc's parent links."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found = {root}
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    return found


class ArgvWatch(threading.Thread):
    """Samples the command line of every process under `root` until stopped."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.stop = root, threading.Event()
        self.seen: dict[int, str] = {}

    def run(self) -> None:
        while not self.stop.is_set():
            for pid in descendants(self.root):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                self.seen.setdefault(pid, argv.decode("utf-8", "replace"))
                if TOKEN in self.seen[pid] and pid != self.root:
                    self.seen[pid] = argv.decode("utf-8", "replace")
            time.sleep(0.01)


def leaks(folder: Path) -> list[str]:
    return [
        str(p)
        for p in folder.rglob("*")
        if p.is_file() and any(t.encode() in p.read_bytes() for t in (TOKEN, QUERY_TOKEN))
    ]


def test_an_authenticated_install_keeps_the_token_off_every_command_line(tmp_path: Path) -> None:
    """The index URLs carry a second secret in their query string, which no netrc can carry:
    uv and pip get those URLs from their environment instead of their command line."""
    the_lab = lab()
    profile = write_yaml(tmp_path / "authed.yaml", PROFILE)
    settings = lab_config(the_lab)
    mirrors = settings["mirrors"]
    mirrors["pypi"]["index_url"] += f"?token={QUERY_TOKEN}"
    mirrors["pytorch"]["cpu"] += f"?token={QUERY_TOKEN}"
    config = write_yaml(tmp_path / "lab.yaml", settings)
    prefix = tmp_path / "env"
    argv = [str(TOOL), "install", "--config", str(config), "--profile", str(profile)]
    argv += ["--prefix", str(prefix), "--json"]
    env = clean_environ(VERL_BOOTSTRAP_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    before = len(the_lab.server.requests)
    child = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watch = ArgvWatch(child.pid)
    watch.start()
    out, err = child.communicate(timeout=500)
    watch.stop.set()
    watch.join()
    # verl alone fails `uv pip check` (its deps are not installed): every other step must pass
    statuses = {s["id"]: s["status"] for s in json.loads(out)["steps"]}
    assert {k: v for k, v in statuses.items() if k != "verify"} == dict.fromkeys(
        ["create-env", "fetch-source", "install-verl", "small", "record-lock"], "done"
    ), err[-3000:]
    children = {pid: line for pid, line in watch.seen.items() if pid != child.pid}
    assert any("pip install" in line for line in children.values()), children  # uv was seen
    assert [line for line in children.values() if TOKEN in line] == []
    assert [line for line in children.values() if QUERY_TOKEN in line] == []
    served = the_lab.server.requests[before:]
    assert any(QUERY_TOKEN in path for path in served)  # uv used the URL it was given
    assert QUERY_TOKEN not in out + err
    assert any("cachetools" in path for path in served) and any("git" in p for p in served)
    assert TOKEN not in out + err
    assert leaks(prefix / ".verl-bootstrap") == [] and leaks(tmp_path / "home") == []
    assert TOKEN not in (prefix / "src" / "verl" / ".git" / "config").read_text()
    lock = prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml"
    outputs = {"requirements": "req", "pylock": "pylock.toml", "conda-lock": "conda-lock.yml"}
    (tmp_path / "exports").mkdir()  # export -o writes into an existing folder
    for kind, name in outputs.items():
        done = subprocess.run(
            [
                str(TOOL),
                "export",
                "--format",
                kind,
                "--lockfile",
                str(lock),
                "--output",
                str(tmp_path / "exports" / name),
            ],
            env={**env, "VERL_BOOTSTRAP_CONFIG": str(config)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert TOKEN not in done.stdout + done.stderr
    assert (tmp_path / "exports").exists() and leaks(tmp_path / "exports") == []


def test_lifting_keeps_the_argv_clean_and_the_netrc_private(tmp_path: Path) -> None:
    url = f"http://lab:{TOKEN}@127.0.0.1:1/simple"
    lifted = lift(
        ["uv", "pip", "install", "--default-index", url, f"x @ git+{url}"], {"HOME": str(tmp_path)}
    )
    try:
        assert TOKEN not in " ".join(lifted.argv)
        assert lifted.argv[4] == "http://127.0.0.1:1/simple"
        netrc = Path(lifted.env["NETRC"])
        assert oct(netrc.stat().st_mode & 0o777) == "0o600"
        assert oct(netrc.parent.stat().st_mode & 0o777) == "0o700"
        assert f"machine 127.0.0.1 login lab password {TOKEN}" in netrc.read_text()
        assert lifted.env["GIT_CONFIG_KEY_0"] == "http.http://127.0.0.1:1/.extraHeader"
    finally:
        lifted.cleanup()
    assert not netrc.exists()
    assert split_url("https://h/x?a=1") == ("https://h/x?a=1", None)
    assert os.environ.get("NETRC") != str(netrc)


def test_an_index_url_with_a_query_token_moves_into_the_environment_whole() -> None:
    url = f"http://127.0.0.1:1/simple?token={QUERY_TOKEN}"
    plain = "http://127.0.0.1:2/simple"
    uv = lift(
        [
            "/x/uv",
            "pip",
            "install",
            "--default-index",
            url,
            "--extra-index-url",
            plain,
            "--extra-index-url",
            url,
            "pkg",
        ],
        {},
    )
    assert uv.argv == ["/x/uv", "pip", "install", "pkg"]
    assert uv.env["UV_DEFAULT_INDEX"] == uv.env["UV_INDEX_URL"] == url
    assert uv.env["UV_EXTRA_INDEX_URL"] == f"{plain} {url}"  # every URL of the kind, in order
    pip = lift(["py", "-m", "pip", "install", f"--index-url={url}", "--extra-index-url", plain], {})
    assert pip.argv == ["py", "-m", "pip", "install", "--extra-index-url", plain]
    assert pip.env == {"PIP_INDEX_URL": url}
    clean = lift(["/x/uv", "pip", "install", "--default-index", plain], {})
    assert clean.argv[-1] == plain and clean.env == {}


def test_a_git_url_with_a_query_token_is_fetched_through_an_insteadof_setting() -> None:
    url = f"https://git.example/verl.git?token={QUERY_TOKEN}"
    lifted = lift(["git", "clone", url, "dest"], {"GIT_CONFIG_COUNT": "1"})
    assert lifted.argv == ["git", "clone", "https://git.example/verl.git", "dest"]
    assert lifted.env == {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_1": f"url.{url}.insteadOf",
        "GIT_CONFIG_VALUE_1": "https://git.example/verl.git",
    }


def _flat_wheel(folder: Path, name: str) -> None:
    """A one-module wheel `name` 1.0 in `folder` (a real wheel uv can install)."""

    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": b"",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    digest = {
        k: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=")
        for k, v in files.items()
    }
    record = "".join(f"{k},sha256={digest[k].decode()},{len(v)}\n" for k, v in files.items())
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
        for path, body in files.items():
            wheel.writestr(path, body)
        wheel.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")


def test_find_links_with_a_query_token_reach_uv_through_its_variable(tmp_path: Path) -> None:
    # Two find-links locations, one of them a URL with a token: both leave argv for
    # UV_FIND_LINKS (comma-separated), and a real uv finds the packages of both from there.

    for name in ("alpha", "beta"):
        _flat_wheel(tmp_path / name, name)
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if f"token={QUERY_TOKEN}" not in self.path and not self.path.endswith(".whl"):
                self.send_error(403)
                return
            self.path = self.path.split("?", 1)[0]
            super().do_GET()

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(Handler, directory=str(tmp_path / "beta"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/?token={QUERY_TOKEN}"
    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "-q", str(tmp_path / "v")], check=True)
    argv = [
        uv,
        "pip",
        "install",
        "--python",
        str(tmp_path / "v" / "bin" / "python"),
        "--no-index",
        "--dry-run",
        "-f",
        str(tmp_path / "alpha"),
        "--find-links",
        url,
        "alpha",
        "beta",
    ]
    try:
        lifted = lift(argv, {})
        assert QUERY_TOKEN not in " ".join(lifted.argv)
        assert lifted.env == {"UV_FIND_LINKS": f"{tmp_path / 'alpha'},{url}"}
        done = subprocess.run(
            lifted.argv,
            env={**os.environ, **lifted.env},
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert "alpha==1.0" in done.stderr and "beta==1.0" in done.stderr
    assert any(QUERY_TOKEN in path for path in seen)  # the server got the token
    pip = lift(["py", "-m", "pip", "install", "-f", url, "-f", "/links", "x"], {})
    assert pip.argv == ["py", "-m", "pip", "install", "x"]
    assert pip.env == {"PIP_FIND_LINKS": f"{url} /links"}
