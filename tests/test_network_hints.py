"""Network errors point the right way: a real local HTTPS index whose certificate is signed by a CA
this machine does not trust (made with openssl here) stands for a lab mirror behind a corporate
CA. A run against it says which host failed and that `network.ca_bundle` in the site config fixes
it; each URL that fails is on its own line with its own fix; uv's and pip's hints naming their
own flags (`--system-certs`), which verl-bootstrap does not have, are not passed on; and the
setting named does fix it (doctor then finds the index answering).
"""

from __future__ import annotations

import http.server
import os
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from scaffold import run_tool

from verl_bootstrap.machine.host.netfaults import net_fault, without_tool_hints

# This machine's own CA settings are not a new user's: without them uv adds its hint.
_CA_VARIABLES = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
)


@dataclass(frozen=True)
class Index:
    url: str  # https://127.0.0.1:PORT/simple
    host: str  # 127.0.0.1:PORT
    ca: Path  # the CA that signed its certificate (trusted nowhere by default)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for 127.0.0.1 it signed (with its key)."""
    assert shutil.which("openssl"), "openssl makes the test's CA (Debian: apt-get install openssl)"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Lab CA",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=folder)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "host.key", "-out", "host.csr", cwd=folder)  # fmt: skip
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", "host.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "host.pem",
             cwd=folder)  # fmt: skip
    return folder / "ca.pem", folder / "host.pem", folder / "host.key"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    """An empty PEP 503 index over HTTPS on loopback, its certificate signed by the test's CA."""
    folder = tmp_path_factory.mktemp("tls-index")
    ca, cert, key = _certificates(folder)
    (folder / "www" / "simple").mkdir(parents=True)
    (folder / "www" / "simple" / "index.html").write_text("<html><body></body></html>")
    handler = _quiet_handler(folder / "www")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    try:
        yield Index(f"https://{host}/simple", host, ca)
    finally:
        server.shutdown()
        server.server_close()


def _quiet_handler(root: Path) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def _user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's environment: no CA settings, no pip settings of this machine's."""
    env = {k: v for k, v in os.environ.items() if k not in _CA_VARIABLES}
    env = {k: v for k, v in env.items() if not k.startswith(("PIP_", "UV_", "VERL_BOOTSTRAP_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, VERL_BOOTSTRAP_HOME=str(tmp_path / "home"), **extra)
    return env


def test_an_untrusted_index_names_its_host_and_ca_bundle_and_no_flag_the_tool_lacks(
    index: Index, tmp_path: Path
) -> None:
    argv = ["--profile", "cpu", "--prefix", str(tmp_path / "env"), "--index"]
    done = run_tool(*argv, f"default={index.url}", env=_user_env(tmp_path), cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 3, said[-3000:]  # the preflight refuses it
    assert "--system-certs" not in said and "--native-tls" not in said
    first = done.stderr.splitlines()[0]  # a run says it on stderr, with its progress
    assert first.startswith(
        "resolving: the locked versions could not be looked up on your indexes: "
        f"{index.host}: its TLS certificate is not trusted here ("
    )
    assert "`network.ca_bundle: /path/to/ca.pem`" in first
    lines = done.stderr.splitlines()
    assert f"    index:default ({index.url}): its TLS certificate is not trusted here" in "\n".join(
        lines
    )
    fix = f"network.ca_bundle: /path/to/ca.pem` (the CA that signed {index.host}'s certificate)"
    assert any(line.startswith("    fix: ") for line in lines)
    assert any(fix in line and "index:default" in line for line in lines), lines
    for line in lines:  # each host on its own line: never the git host beside the index
        assert not (index.host in line and "github.com" in line), line
        assert not ("pytorch-cpu" in line and "certificate" in line), line


def test_a_failed_step_says_the_host_and_the_setting_not_pips_or_uvs_hint(
    index: Index, tmp_path: Path
) -> None:
    """Past the preflight, verl's sdist is fetched from the untrusted index and fails."""
    argv = ["--profile", "cpu", "--prefix", str(tmp_path / "env"), "--resolve"]
    argv += ["--skip-check", "network", "--skip-check", "cpu-torch", "--index"]
    done = run_tool(*argv, f"default={index.url}", env=_user_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 1, (done.stdout + done.stderr)[-3000:]
    assert "--system-certs" not in done.stdout + done.stderr
    (hint,) = [line for line in done.stderr.splitlines() if line.startswith("hint: ")]
    assert hint.startswith(f"hint: {index.host}: its TLS certificate is not trusted here")
    assert "network.ca_bundle" in hint


def _doctor_index(index: Index, tmp_path: Path, **network: str) -> dict[str, Any]:
    """The default index's line of doctor's network check, with a site config naming the index
    (and `network`)."""
    config: dict[str, Any] = {"schema_version": 1, "mirrors": {"pypi": {"index_url": index.url}}}
    if network:
        config["network"] = network
    site = tmp_path / f"site-{len(network)}.yaml"
    site.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = _user_env(tmp_path, VERL_BOOTSTRAP_CONFIG=str(site))
    done = run_tool("doctor", "--profile", "cpu", "--json", env=env, cwd=tmp_path)
    report = yaml.safe_load(done.stdout)
    (check,) = [c for c in report["checks"] if c["name"] == "network"]
    (url,) = [u for u in check["data"]["urls"] if u["label"] == "index:default"]
    return {"check": check, "url": url}


def test_the_setting_named_fixes_it(index: Index, tmp_path: Path) -> None:
    untrusted = _doctor_index(index, tmp_path)
    assert untrusted["url"]["status"] == "fail"
    assert "network.ca_bundle" in untrusted["check"]["fix"]
    trusted = _doctor_index(index, tmp_path, ca_bundle=str(index.ca))
    assert trusted["url"]["status"] == "ok", trusted


# What uv 0.13.9 printed here for an index whose certificate no CA it reads vouches for (no
# SSL_CERT_FILE set), verbatim: its hint names a flag of uv's own.
UV_SAID = """\
error: Failed to fetch: `https://127.0.0.1:8443/simple/requests/`
  Caused by: error sending request for url (https://127.0.0.1:8443/simple/requests/)
  Caused by: client error (Connect)
  Caused by: invalid peer certificate: UnknownIssuer

hint: Consider enabling use of system TLS certificates with the `--system-certs` command-line flag
"""


def test_uvs_own_words_are_read_as_the_host_and_the_fix_without_its_hint() -> None:
    fault = net_fault(UV_SAID)
    assert fault is not None and (fault.kind, fault.host) == ("tls", "127.0.0.1:8443")
    assert "network.ca_bundle" in fault.fix()
    kept = without_tool_hints(UV_SAID.splitlines())
    assert [line for line in kept if "--system-certs" in line] == []
    assert len(kept) == len(UV_SAID.splitlines()) - 1  # only the hint goes
