"""The network check against real sockets on loopback: a live HTTP server and closed ports."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from verl_bootstrap.httpclient import proxies_for
from verl_bootstrap.plan.doctor import DoctorInputs, Status, run_doctor
from verl_bootstrap.plan.doctor.checks_network import probe_url
from verl_bootstrap.plan.doctor.results import CheckResult
from verl_bootstrap.profile.models import Profile


class _Index(BaseHTTPRequestHandler):
    """/simple/ 200, /private/ 401, /head-refused/ refuses HEAD, /slow/S/ waits S s, else 404."""

    def _answer(self, head: bool) -> None:
        if self.path.startswith("/slow/"):  # /slow/SECONDS/: answers after that long
            time.sleep(float(self.path.split("/")[2]))
            self.path = "/simple/"
        if self.path.startswith("/head-refused/") and head:
            code = 405
        else:
            code = {"/simple/": 200, "/private/": 401, "/head-refused/": 200}.get(self.path, 404)
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: no request log
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port that was just free: nothing listens there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _network(urls: tuple[tuple[str, str], ...], **inputs: Any) -> CheckResult:
    fields: dict[str, Any] = {"environ": {}, "urls": urls, "network_timeout": 3.0, **inputs}
    return run_doctor(DoctorInputs(**fields), only=["network"]).checks[0]


def test_a_live_index_answers(server: str) -> None:
    result = _network((("index:pypi", f"{server}/simple/"),))
    assert result.status is Status.OK
    assert [(u["label"], u["status"]) for u in result.data["urls"]] == [("index:pypi", "ok")]


def test_an_unreachable_index_is_named_with_the_setting_that_replaces_it(
    server: str, closed_port: int
) -> None:
    dead = f"http://127.0.0.1:{closed_port}/simple/"
    result = _network((("index:pypi", f"{server}/simple/"), ("index:pytorch", dead)))
    assert result.status is Status.FAIL
    assert f"1 of 2 URLs answer:\n    index:pytorch ({dead}): Connection refused" == result.finding
    assert result.fix and "PIP_INDEX_URL" in result.fix and "HTTPS_PROXY" in result.fix


def test_http_answers_are_classified(server: str) -> None:
    assert probe_url("i", f"{server}/private/", {}, 3).status == "warn"
    assert probe_url("i", f"{server}/missing/", {}, 3).detail == "HTTP 404"
    refused_head = probe_url("i", f"{server}/head-refused/", {}, 3)
    assert (refused_head.status, refused_head.detail) == ("ok", "HTTP 200")


def test_an_optional_index_that_is_down_only_warns(closed_port: int) -> None:
    profile = Profile.model_validate(
        {
            "schema_version": 1,
            "name": "fsdp",
            "stages": [{"id": "install-verl", "kind": "install-verl"}],
            "indexes": {"wheelhouse": {"url": "https://example.invalid/", "optional": True}},
        }
    )
    dead = f"http://127.0.0.1:{closed_port}/simple/"
    assert _network((("index:wheelhouse", dead),), profile=profile).status is Status.WARN


def test_the_users_proxy_is_used_and_no_proxy_respected(server: str, closed_port: int) -> None:
    proxy = f"http://127.0.0.1:{closed_port}"
    env = {"HTTPS_PROXY": proxy, "http_proxy": proxy}
    assert proxies_for("https://index.example/simple/", env) == {"http": proxy, "https": proxy}
    through_dead_proxy = probe_url("index:pypi", f"{server}/simple/", env, 3)
    assert through_dead_proxy.status == "fail" and through_dead_proxy.via_proxy == proxy
    bypassed = probe_url("index:pypi", f"{server}/simple/", {**env, "no_proxy": "127.0.0.1"}, 3)
    assert bypassed.status == "ok" and bypassed.via_proxy is None


def test_git_urls_are_probed_with_git_ls_remote(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}/verl-project/verl.git"
    reach = probe_url("git:verl", url, {}, 3)
    assert reach.status == "fail" and "127.0.0.1" in reach.detail
    result = _network((("git:verl", url),))
    assert result.fix and f"url.<mirror>.insteadOf {url}" in result.fix


def test_local_paths_exist_or_not(tmp_path: Path) -> None:
    assert probe_url("channel:local", f"file://{tmp_path}", {}, 3).status == "ok"
    assert probe_url("channel:local", str(tmp_path / "gone"), {}, 3).status == "fail"
    assert probe_url("git:verl", f"git+file://{tmp_path}", {}, 3).status == "ok"
    assert probe_url("channel:x", "conda-forge", {}, 3).detail == "neither a URL nor a path"


def test_credentials_never_reach_the_report(closed_port: int) -> None:
    url = f"http://user:s3cret@127.0.0.1:{closed_port}/simple/?token=abc"
    result = _network((("index:private", url),))
    assert "s3cret" not in result.to_dict().__repr__() and "abc" not in result.finding


def test_no_urls_is_skipped() -> None:
    assert _network(()).status is Status.SKIPPED


def test_a_url_that_only_timed_out_gets_a_second_longer_try(server: str) -> None:
    # 0.5 s to answer: past the first 0.3 s try, within the second (3 x 0.3 s)
    slow = _network((("index:slow", f"{server}/slow/0.5/"),), network_timeout=0.3)
    assert slow.status is Status.OK
    (url,) = slow.data["urls"]
    assert url["detail"] == "HTTP 200 (slow: answered on the second try)"
    stuck = _network((("index:stuck", f"{server}/slow/1.5/"),), network_timeout=0.3)
    assert stuck.status is Status.FAIL
    assert "no answer within 0.9 s" in stuck.finding


# --- the plan's probe of optional indexes (verl_bootstrap.httpclient) ---------------------------


def test_the_plans_probe_takes_any_answer_below_500_as_reachable(
    server: str, closed_port: int, tmp_path: Path
) -> None:
    from verl_bootstrap.httpclient import reachable  # noqa: PLC0415

    assert reachable(f"{server}/simple/")
    assert reachable(f"{server}/private/")  # 401: the index is there, it wants credentials
    assert reachable(f"{server}/nothing-here/")  # 404 is an answer too
    assert not reachable(f"http://127.0.0.1:{closed_port}/simple/")
    assert not reachable(f"{server}/slow/2/", timeout=0.5)
    assert reachable(tmp_path.as_uri()) and reachable(str(tmp_path))
    assert not reachable((tmp_path / "missing").as_uri())


def test_an_unreadable_ca_bundle_makes_an_https_index_unreachable_not_a_crash(
    tmp_path: Path, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_bootstrap.httpclient import reachable  # noqa: PLC0415

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "no-such-bundle.pem"))
    assert not reachable(f"https://127.0.0.1:{closed_port}/simple/")


def test_the_plans_probe_goes_through_the_users_proxy(
    server: str, closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_bootstrap.httpclient import reachable  # noqa: PLC0415

    # the loopback server stands in as the proxy: an unresolvable host answers through it
    target = "http://index.invalid/simple/"
    monkeypatch.setenv("HTTP_PROXY", server)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    assert reachable(target)
    monkeypatch.setenv("NO_PROXY", "index.invalid")  # the user says: go there directly
    assert not reachable(target)
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port}")  # a dead proxy
    assert not reachable(target)
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setenv("ALL_PROXY", server)  # the fallback for every scheme, as doctor reads it
    assert reachable(target)
