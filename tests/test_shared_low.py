"""Issue 32's low findings, each for real: a shared wheelhouse index one lab mate spoiled, two
git URLs that redact alike, a lab `lockfiles:` URL with a query, a server that sends one byte at
a time (loopback servers, bounded in time), and a find-links page's `%2B`."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback import Server, base_url, serve
from scaffold import run
from tinyenv import kernel_wheel

from verl_bootstrap import cli
from verl_bootstrap.httpclient import HttpError, fetch
from verl_bootstrap.source.cache import GitFailed, checkout_from_cache, mirror_dir

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
KEY = "torch=2.8.0,cuda=12.8,cxx11abi=TRUE,python=cp312,platform=linux_x86_64"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user of this test's own: home, tool home and caches under tmp_path."""
    for var in ("VERL_BOOTSTRAP_CONFIG", "PIP_CONFIG_FILE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home" / ".verl-bootstrap"))
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "home"


def wheel(folder: Path) -> Path:
    """A kernel's wheel for KEY's Python and platform."""
    return kernel_wheel(folder, "w", "1.0")


# --- a shared wheelhouse ---


def test_a_key_that_is_no_key_is_refused_when_added_and_the_index_stays_readable(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "wh"
    bad = "torch=;rm,cuda=12.8,cxx11abi=TRUE,python=cp312,platform=linux_x86_64"
    argv = ["wheelhouse", "add", str(wheel(tmp_path)), "--wheelhouse", str(house)]
    assert cli.main([*argv, "--key", bad]) == 2
    assert "--key.torch: ';rm' is not a torch version" in capsys.readouterr().err
    assert not house.exists()  # nothing was written where the lab reads
    assert cli.main([*argv, "--key", KEY]) == 0
    assert cli.main(["wheelhouse", "list", "--wheelhouse", str(house)]) == 0


def test_one_bad_entry_in_a_shared_index_is_skipped_with_a_note_not_a_refusal(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "wh"
    good = wheel(tmp_path)
    assert cli.main(["wheelhouse", "add", str(good), "--wheelhouse", str(house), "--key", KEY]) == 0
    # a lab mate with write access lists a second wheel under a key no reader can use
    index = json.loads((house / "index.json").read_text())
    spoiled = {**index["wheels"][0], "file": "v-1.0-py3-none-any.whl"}
    spoiled["key"] = {**spoiled["key"], "torch": ";rm -rf ~"}
    index["wheels"].append(spoiled)
    (house / "index.json").write_text(json.dumps(index))
    capsys.readouterr()
    assert cli.main(["wheelhouse", "list", "--wheelhouse", str(house)]) == 0
    shown = capsys.readouterr()
    assert "1 wheel(s)" in shown.out and good.name in shown.out
    assert "v-1.0" not in shown.out
    assert "note: skipped an entry of the wheelhouse index" in shown.err
    assert "wheels[1].key.torch: ';rm -rf ~' is not a torch version" in shown.err
    assert cli.main(["wheelhouse", "list", "--wheelhouse", str(house), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [w["file"] for w in listed["wheels"]] == [good.name] and len(listed["notes"]) == 1
    # `check` is where the owner learns of it: a problem, named
    assert cli.main(["wheelhouse", "check", "--wheelhouse", str(house)]) == 1
    assert "wheels[1].key.torch" in capsys.readouterr().out


def test_a_wheelhouse_url_with_one_bad_entry_is_read_too(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same index served over http (a lab's read-only wheelhouse URL)."""
    house = tmp_path / "wh"
    good = wheel(tmp_path)
    assert cli.main(["wheelhouse", "add", str(good), "--wheelhouse", str(house), "--key", KEY]) == 0
    index = json.loads((house / "index.json").read_text())
    index["wheels"].append({**index["wheels"][0], "sha256": "not-a-sha"})
    (house / "index.json").write_text(json.dumps(index))
    server = serve(house)
    try:
        site = tmp_path / "site.yaml"
        site.write_text(f"schema_version: 1\nwheelhouse: '{base_url(server)}'\n")
        capsys.readouterr()
        assert cli.main(["wheelhouse", "list", "--config", str(site)]) == 0
        shown = capsys.readouterr()
        assert "1 wheel(s)" in shown.out and "wheels[1].sha256: not a sha256" in shown.err
        assert cli.main(["wheelhouse", "check", "--config", str(site)]) == 1
        assert "wheels[1].sha256: not a sha256 (64 hex digits) (skipped)" in capsys.readouterr().out
    finally:
        server.shutdown()


# --- the git mirror cache ---


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def test_two_urls_that_redact_alike_have_two_mirrors_and_one_never_serves_the_other(
    home: Path, tmp_path: Path
) -> None:
    """A token-shaped path part is masked in every message; the cache must still tell the two
    repositories apart, or the unreachable one is served the other's commit."""
    token_a, token_b = "hf_" + "a" * 24, "hf_" + "b" * 24
    repo = tmp_path / token_a / "verl"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "setup.py").write_text("print('a')\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "a")
    _git(repo, "tag", "v1")
    url_a, url_b = repo.as_uri(), (tmp_path / token_b / "verl").as_uri()
    assert mirror_dir(url_a) != mirror_dir(url_b)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    got = checkout_from_cache(url_a, "v1", tmp_path / "one", env, offline=False)
    assert got.commit == _git(repo, "rev-parse", "v1")
    with pytest.raises(GitFailed):  # B is not there: no commit of A's stands in for it
        checkout_from_cache(url_b, "v1", tmp_path / "two", env, offline=False)
    assert not (tmp_path / "two").exists()


# --- a lab lockfiles URL with a query ---


class _Lab(http.server.SimpleHTTPRequestHandler):
    """The lab's lockfiles folder, served only to a request with ?private_token=s3cret."""

    asked: list[str] = []  # noqa: RUF012 - the paths asked for, read by the test

    def do_GET(self) -> None:
        type(self).asked.append(self.path)
        if not self.path.endswith("?private_token=s3cret"):
            self.send_error(401)
            return
        self.path = self.path.partition("?")[0]
        super().do_GET()

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "served"
    (root / "locks" / "cpu").mkdir(parents=True)
    (root / "locks" / "cpu" / "cpu-linux-64.lock.yaml").write_bytes(LOCK.read_bytes())
    handler = type("Lab", (_Lab,), {"asked": []})
    server = Server(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield base_url(server)
    server.shutdown()


def _plan_with(tmp_path: Path, lockfiles: str, capsys: pytest.CaptureFixture[str]) -> str:
    site = tmp_path / "site.yaml"
    site.write_text(f"schema_version: 1\nlockfiles: '{lockfiles}'\n")
    argv = ["plan", "--profile", "cpu", "--prefix", str(tmp_path / "env"), "--config", str(site)]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    return out


def test_a_lockfiles_url_with_a_query_gets_the_path_before_the_query(
    home: Path, tmp_path: Path, lab: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = _plan_with(tmp_path, f"{lab}/locks?private_token=s3cret", capsys)
    first = shown.splitlines()[0]
    assert first.startswith("from lockfile ") and "lab-lockfiles" in first, shown
    assert "not the lab's lockfile" not in shown
    assert "s3cret" not in shown


def test_a_lockfiles_url_that_cannot_be_fetched_says_so(
    home: Path, tmp_path: Path, lab: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = _plan_with(tmp_path, f"{lab}/locks?private_token=wrong", capsys)
    assert shown.splitlines()[0].startswith("from lockfile lockfiles/cpu/")  # the shipped one
    note = next(line for line in shown.splitlines() if "not the lab's lockfile" in line)
    assert "cannot fetch the lab lockfile" in note and "HTTP 401" in note, note
    assert "wrong" not in shown  # the token is redacted in the note


# --- a server that sends one byte at a time ---


class _Dripping:
    """A loopback server that answers each request one byte every `every` seconds, for ever
    (until the test stops it): in its headers (`headers=True`) or in a 1 MB body."""

    def __init__(self, *, headers: bool, every: float = 0.2) -> None:
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.headers, self.every = headers, every
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/c.yaml"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            if not self.headers:
                conn.sendall(b"Content-Length: 1000000\r\n\r\n")
            try:
                while not self.stop.wait(self.every):
                    conn.sendall(b"X-Slow: x\r\n" if self.headers else b"#")
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.fixture(params=["headers", "body"])
def dripping(request: pytest.FixtureRequest) -> Iterator[_Dripping]:
    server = _Dripping(headers=request.param == "headers")
    yield server
    server.close()


def _within(seconds: float, call: object) -> object:
    """`call()`'s result or exception, run in a thread the test waits on at most `seconds`
    for: without a deadline the call would never return, and the test must still end."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(call())  # type: ignore[operator]
        except BaseException as exc:  # any: handed back to the test
            box.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the request was still waiting: it has no overall deadline"
    return box[0]


def test_a_fetch_from_a_server_that_drips_ends_at_its_deadline(dripping: _Dripping) -> None:
    got = _within(60, lambda: fetch(dripping.url, timeout=5, deadline=1.5))
    assert isinstance(got, HttpError) and got.timed_out, got
    assert "no whole answer within 1.5s" in got.reason


@pytest.mark.timeout(60)  # the CLI runs in the main thread: without a deadline it never ends
def test_plan_config_url_from_a_server_that_drips_is_an_error_not_a_wait(
    dripping: _Dripping,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from verl_bootstrap.siteconfig import siteload  # noqa: PLC0415

    monkeypatch.setattr(siteload, "CONFIG_DEADLINE", 1.5)  # 60 s in use: a test waits less
    assert cli.main(["plan", "--profile", "cpu", "--config", dripping.url, "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "InputError", error
    assert error["data"] == {"url": dripping.url, "timed_out": True}, error


# --- a find-links page's %2B ---


def test_a_wheel_url_with_an_escaped_plus_is_read_by_its_file_name() -> None:
    """A find-links page (a folder listing) writes the `+` of a local version as `%2B`."""
    from verl_bootstrap.lock.lookup import served_artifacts  # noqa: PLC0415
    from verl_bootstrap.plan.doctor.preflight import _platforms  # noqa: PLC0415

    name = "torch-2.8.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl"
    url = "http://127.0.0.1:1/wheels/" + name.replace("+", "%2B")
    pylock = {
        "packages": [{"name": "torch", "wheels": [{"url": url, "hashes": {"sha256": "0" * 64}}]}]
    }
    (artifact,) = served_artifacts(pylock)["torch"]
    assert artifact.filename == name
    assert _platforms(artifact.filename) == {"manylinux_2_28_x86_64"}
    assert _platforms("not-a-wheel.whl") == set()


# --- a site config fetched by URL reads only the variables you name ---


def test_a_config_from_a_url_reads_only_the_variables_you_name(
    home: Path,
    lab: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served = tmp_path / "served" / "c.yaml"
    served.write_text(
        "schema_version: 1\nmirrors: {pypi: {index_url: 'https://m.invalid/${LAB_X}/s'}}\n"
    )
    url = f"{lab}/c.yaml?private_token=s3cret"
    monkeypatch.setenv("LAB_X", "abc")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "k")
    for named in (None, "AWS_SECRET_ACCESS_KEY"):  # none named, then that one, not this one
        if named:
            monkeypatch.setenv("VERL_BOOTSTRAP_CONFIG_VARS", named)
        assert cli.main(["config", "show", "--config", url, "--json"]) == 2
        data = json.loads(capsys.readouterr().out)["error"]["data"]
        assert (data["variable"], data["cause"]) == ("LAB_X", "not-allowed"), data
    monkeypatch.setenv("VERL_BOOTSTRAP_CONFIG_VARS", "LAB_X")
    assert cli.main(["config", "show", "--config", url]) == 0
    assert "https://m.invalid/abc/s" in capsys.readouterr().out


def test_an_onboarding_script_names_the_variables_its_config_reads(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_TOKEN", "t0k")
    local = tmp_path / "lab.yaml"
    local.write_text(
        "schema_version: 1\nmirrors: {pypi: {index_url: 'https://lab:${LAB_TOKEN}@m.invalid/s'}}\n"
    )
    script = tmp_path / "onboard.sh"
    argv = ["onboard", "--config", str(local), "--emit-script", str(script)]
    assert cli.main([*argv, "--publish-config", "https://lab.invalid/c.yaml"]) == 0
    text = script.read_text()
    assert "export VERL_BOOTSTRAP_CONFIG_VARS=${VERL_BOOTSTRAP_CONFIG_VARS-LAB_TOKEN}" in text
    assert "t0k" not in text
