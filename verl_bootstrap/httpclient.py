"""The one HTTP client: every probe and download the tool makes goes through here.

It is requests, imported only when a remote URL is asked for (`--help` and a plan that probes
nothing never load it). requests drops the `Authorization` header when a redirect changes the
scheme, host or port, so a server cannot pass the user's credentials on to another host.

The user's settings come from an explicit environment mapping (doctor checks another user's or
node's settings), so requests' own reading of the process environment is off: proxies from
HTTPS_PROXY, HTTP_PROXY and ALL_PROXY, with NO_PROXY honoured; a CA bundle from
REQUESTS_CA_BUNDLE or SSL_CERT_FILE, as for pip and uv; credentials from the URL's userinfo,
else from $NETRC or ~/.netrc, sent as basic auth and never shown. Errors carry a redacted,
one-line reason.

`timeout` bounds each wait for a byte; a server that sends one byte just inside it, forever,
would hold the run forever, so every request also has an overall deadline: the request runs in
a worker thread, and the caller stops waiting (an HttpError, `timed_out`) when it passes. The
worker is told to stop at its next chunk, and a daemon thread never keeps the process alive.

A download (kernel wheels, bundles, sdists: gigabytes) outlives one dropped connection: a
connection that drops once the server has answered (or a 408, 429, 5xx answer) is tried again,
at most four more times with pauses of 0.5, 1, 2 and 4 s, and resumed where it stopped with a
Range request. The partial file is kept for that, and asked for again only with the validator
its first answer came with (`If-Range`: its ETag, else Last-Modified): a server that ignores the
Range, or whose file changed since, answers with the whole file, and the download starts over
cleanly; with no validator it starts over too. The caller checks the sha256 over the whole file
at the end. While it runs, the live line shows its bytes (an event of kind `live`); each retry
is a note.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import unquote, urlparse, urlunparse

from verl_bootstrap.events import emit
from verl_bootstrap.redact import redact

if TYPE_CHECKING:  # requests is imported only when a remote URL is asked for
    import requests

__all__ = [
    "HttpError",
    "Page",
    "download",
    "fetch",
    "fetch_page",
    "fetch_range",
    "proxies_for",
    "proxy_for",
    "reachable",
    "status",
]

PROBE_TIMEOUT = 3.0
FETCH_DEADLINE = 120.0  # a small file (a config, an index page, a lockfile), whole
DOWNLOAD_DEADLINE = 3600.0  # a wheel of gigabytes on a slow link, whole
_NOT_ALLOWED = {405, 501}  # some indexes refuse HEAD; ask again with GET
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")
_PROXY_KEYS = {"http": ("http_proxy", "HTTP_PROXY"), "https": ("https_proxy", "HTTPS_PROXY")}
_CHUNK = 1 << 16
_PAUSES = (0.5, 1.0, 2.0, 4.0)  # seconds before each retry of a download: bounded, 7.5 s in all
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_SHOW_EVERY = 1.0  # seconds between a download's progress events
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


class HttpError(Exception):
    """No HTTP answer: `reason` is short and redacted; `timed_out` tells a slow host apart;
    `retryable`: the answer was cut short (or a passing error status), so asking again helps."""

    def __init__(self, reason: str, *, timed_out: bool = False, retryable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out
        self.retryable = retryable


@dataclass
class _Partial:
    """A download's partial file: its bytes so far (the worker thread counts them), the whole
    size when the server said it, and the validator of the answer they came from."""

    path: Path
    size: int = 0
    total: int | None = None
    validator: str | None = None
    got: int = 0  # bytes the latest answer brought

    def headers(self) -> dict[str, str]:
        """Range and If-Range for the rest, when there is a rest and a validator to ask by."""
        if not self.size or not self.validator:
            return {}
        return {"Range": f"bytes={self.size}-", "If-Range": self.validator}

    def restart(self) -> None:
        """Empty it: the next answer is the whole file."""
        self.path.write_bytes(b"")
        self.size, self.total, self.validator = 0, None, None


@dataclass(frozen=True)
class _Target:
    url: str  # without userinfo
    auth: tuple[str, str] | None  # basic-auth login and password, when there are any


def _value(environ: Mapping[str, str], *keys: str) -> str | None:
    return next((environ[k] for k in keys if environ.get(k)), None)


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def proxies_for(url: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's proxy per scheme for `url`: none where NO_PROXY names its host; ALL_PROXY
    serves a scheme that has none of its own."""
    env = _env(environ)
    host = urlparse(url).netloc.rpartition("@")[2]
    if _bypassed(host, _value(env, "no_proxy", "NO_PROXY") or ""):
        return {}
    fallback = _value(env, "all_proxy", "ALL_PROXY")
    found = {scheme: _value(env, *keys) or fallback for scheme, keys in _PROXY_KEYS.items()}
    return {scheme: proxy for scheme, proxy in found.items() if proxy}


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy a request for `url` goes through, or None."""
    return proxies_for(url, environ).get(urlparse(url).scheme)


def _bypassed(host: str, no_proxy: str) -> bool:
    """NO_PROXY as pip and uv read it: `*`, host names and domain suffixes, a port optional."""
    name, _, port = host.partition(":")
    for entry in filter(None, (e.strip() for e in no_proxy.split(","))):
        if entry == "*":
            return True
        want, _, want_port = entry.lstrip(".").partition(":")
        if want_port and want_port != port:
            continue
        if name == want or name.endswith("." + want):
            return True
    return False


def _target(url: str, environ: Mapping[str, str]) -> _Target:
    """The URL to ask, and its credentials: from its userinfo, else from the user's netrc."""
    parsed = urlparse(url)
    if parsed.username is None:
        return _Target(url, _netrc_auth(parsed.hostname or "", environ))
    bare = parsed._replace(netloc=parsed.netloc.rpartition("@")[2])
    return _Target(urlunparse(bare), (unquote(parsed.username), unquote(parsed.password or "")))


def _netrc_auth(host: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """Credentials for `host` in $NETRC or ~/.netrc, as pip, uv and git read them."""
    import netrc  # noqa: PLC0415 - only when a URL carries no credentials

    home = environ.get("HOME") or str(Path.home())
    path = Path(environ.get("NETRC") or Path(home) / ".netrc")
    if not host or not path.is_file():
        return None
    try:
        found = netrc.netrc(str(path)).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return None  # an unreadable netrc is no credentials, as for pip
    if found is None:
        return None
    login, _, password = found
    return login, password or ""


def _session(environ: Mapping[str, str]) -> requests.Session:
    import requests  # noqa: PLC0415 - loaded only for a remote URL: --help and plan start faster

    session = requests.Session()
    session.trust_env = False  # settings come from `environ`, which may not be this process's
    session.verify = _value(environ, "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") or True
    session.headers["Accept-Encoding"] = "identity"  # the bytes as served: hashes are of those
    return session


def _reason(exc: BaseException) -> str:
    """The innermost cause ('Connection refused'), not the whole exception chain; an untrusted
    certificate or a failing proxy in a few words (host.netfaults says what fixes it)."""
    from verl_bootstrap.machine.host.netfaults import net_fault  # noqa: PLC0415 - only on a failure

    fault = net_fault(str(exc))
    if fault is not None and fault.kind in ("tls", "proxy"):
        return fault.what
    found = _ERRNO.search(str(exc))
    return found[1].strip() if found else redact(f"{type(exc).__name__}: {exc}")[:200]


@dataclass(frozen=True)
class _Ask:
    """One request: what to ask, and how long to wait for each byte and for all of them."""

    url: str
    method: str
    environ: Mapping[str, str]
    timeout: float
    deadline: float
    sink: BinaryIO | None = None
    limit: int = -1
    accept: str | None = None  # the Accept header (a PEP 691 index answers JSON for its type)
    partial: _Partial | None = None  # a download's file: the body goes on where it stopped
    byte_range: tuple[int, int] | None = None  # the Range header: first and last byte, inclusive


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    media_type: str  # the Content-Type without its parameters, lower case; "" when none


@dataclass(frozen=True)
class Page:
    """A document and the media type its server named for it (Content-Type, no parameters)."""

    media_type: str
    body: bytes


def _request(ask: _Ask, tick: Callable[[], None] | None = None) -> _Answer:
    """(status, body) of `ask.url` within `ask.deadline` seconds in all (see the module's
    docstring); an HttpError with `timed_out` when it is not whole by then. `tick` is called
    in the caller's thread (events go to the caller's listener) about every second meanwhile."""
    done: list[_Answer] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def work() -> None:
        try:
            done.append(_exchange(ask, stop))
        except BaseException as exc:  # any: raised again in the caller's thread
            failed.append(exc)

    worker = threading.Thread(target=work, name="http-request", daemon=True)
    worker.start()
    ends = time.monotonic() + ask.deadline
    while worker.is_alive() and time.monotonic() < ends:
        worker.join(min(_SHOW_EVERY, max(ends - time.monotonic(), 0)))
        if tick is not None and worker.is_alive():
            tick()
    if worker.is_alive():
        stop.set()
        raise HttpError(f"no whole answer within {ask.deadline:g}s", timed_out=True)
    if failed:
        raise failed[0]
    return done[0]


def _exchange(ask: _Ask, stop: threading.Event) -> _Answer:
    """(status, body) of `url`; the body goes to `sink` instead when one is given. At most
    `limit` bytes of it are read (-1: all), so a server cannot make us buffer gigabytes.

    An HTTP error status is an answer, not an exception; no answer at all is an HttpError.
    """
    import requests  # noqa: PLC0415 - loaded only for a remote URL: --help and plan start faster

    url, method, environ, timeout = ask.url, ask.method, ask.environ, ask.timeout
    target = _target(url, environ)
    try:
        with (
            _session(environ) as session,
            session.request(
                method,
                target.url,
                auth=target.auth,
                proxies=proxies_for(url, environ),
                timeout=timeout,
                headers=_headers(ask) or None,
                stream=True,
                allow_redirects=True,
            ) as answer,
        ):
            kind = answer.headers.get("Content-Type", "").partition(";")[0].strip().lower()
            if method == "HEAD" or answer.status_code >= 400:
                return _Answer(answer.status_code, b"", kind)
            if ask.partial is not None:
                _into_partial(answer, ask.partial, stop)
                return _Answer(answer.status_code, b"", kind)
            return _Answer(answer.status_code, _body(answer, ask.sink, ask.limit, stop), kind)
    except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError):
        reason = "the connection dropped mid-transfer (IncompleteRead)"
        raise HttpError(reason, retryable=True) from None
    except requests.exceptions.ConnectTimeout as exc:
        raise HttpError(_reason(exc), timed_out=True) from None
    except requests.exceptions.Timeout as exc:  # the server answered, then went quiet
        raise HttpError(_reason(exc), timed_out=True, retryable=True) from None
    except (requests.exceptions.RequestException, OSError, ValueError) as exc:
        # no route, refused, TLS, an unreadable CA file, a URL requests cannot parse; a server
        # that took the connection and closed it (or went quiet mid-body: requests raises that
        # as a ConnectionError too) may answer the next one
        quiet = "Read timed out" in str(exc)
        raise HttpError(_reason(exc), timed_out=quiet, retryable=quiet or _hung_up(exc)) from None


def _hung_up(exc: BaseException) -> bool:
    """Whether the server took the connection and then dropped it (not: refused, no route)."""
    import requests  # noqa: PLC0415 - loaded only for a remote URL: --help and plan start faster

    text = str(exc)
    dropped = "Connection aborted" in text or "Connection reset" in text
    return isinstance(exc, requests.exceptions.ConnectionError) and dropped


def _headers(ask: _Ask) -> dict[str, str]:
    """Accept, and a Range: a download's rest (with its If-Range), or a byte range asked for."""
    headers = {"Accept": ask.accept} if ask.accept else {}
    headers.update(ask.partial.headers() if ask.partial else {})
    if ask.byte_range is not None:
        headers["Range"] = "bytes={}-{}".format(*ask.byte_range)
    return headers


def _body(
    answer: requests.Response, sink: BinaryIO | None, limit: int, stop: threading.Event
) -> bytes:
    """The body, into `sink` or read up to `limit`; urllib3 checks it against Content-Length.
    Reading ends at the next chunk once `stop` is set (the caller gave up waiting)."""
    chunks = answer.iter_content(_CHUNK)
    if sink is not None:
        for chunk in chunks:
            if stop.is_set():
                return b""
            sink.write(chunk)
        return b""
    body = bytearray()
    for chunk in chunks:
        if stop.is_set():
            return b""
        body += chunk
        if 0 <= limit <= len(body):
            return bytes(body[:limit])
    return bytes(body)


def status(url: str, *, environ: Mapping[str, str] | None = None, timeout: float) -> int:
    """The HTTP status `url` answers with (HEAD, else GET where HEAD is refused); each within
    twice `timeout` in all."""
    env = _env(environ)
    code = _request(_Ask(url, "HEAD", env, timeout, 2 * timeout)).status
    if code in _NOT_ALLOWED:
        code = _request(_Ask(url, "GET", env, timeout, 2 * timeout, limit=0)).status
    return code


def reachable(url: str, *, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when `url` answers (any HTTP status below 500) or names an existing local path."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else url).exists()
    try:
        return status(url, timeout=timeout) < 500
    except HttpError:
        return False


def fetch(
    url: str,
    *,
    environ: Mapping[str, str] | None = None,
    timeout: float = 30,
    limit: int = -1,
    deadline: float = FETCH_DEADLINE,
) -> bytes:
    """The body of `url` (at most `limit` bytes), whole within `deadline` seconds; an HTTP
    error status or no answer is an HttpError."""
    return _get(_Ask(url, "GET", _env(environ), timeout, deadline, limit=limit)).body


def fetch_page(
    url: str, *, accept: str, timeout: float = 30, limit: int = -1, deadline: float = FETCH_DEADLINE
) -> Page:
    """`url` asked for with `accept` as its Accept header, as `fetch` asks: the body and the
    media type the server chose (a simple index may answer JSON, or only ever HTML)."""
    answer = _get(_Ask(url, "GET", _env(None), timeout, deadline, limit=limit, accept=accept))
    return Page(media_type=answer.media_type, body=answer.body)


def fetch_range(
    url: str, first: int, last: int, *, timeout: float = 30, deadline: float = FETCH_DEADLINE
) -> bytes:
    """Bytes `first` to `last` (inclusive) of `url`: a server that ignores the Range header and
    sends the whole file is an HttpError (no more than the range is ever read)."""
    size = last - first + 1
    ask = _Ask(url, "GET", _env(None), timeout, deadline, limit=size, byte_range=(first, last))
    answer = _get(ask)
    if answer.status != 206 and first > 0:
        raise HttpError(f"HTTP {answer.status} to a range request (the server sends whole files)")
    return answer.body


def _get(ask: _Ask) -> _Answer:
    """The answer to `ask`; an HTTP error status is an HttpError here."""
    answer = _request(ask)
    if answer.status >= 400:
        raise HttpError(f"HTTP {answer.status}")
    return answer


def download(
    url: str, dest: Path, *, timeout: float = 60, deadline: float = DOWNLOAD_DEADLINE
) -> None:
    """Write `url` (or a file:// URL) into `dest` atomically, whole within `deadline` seconds,
    retried and resumed where a connection drops (see the module's docstring)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(dest.suffix + ".part")
    try:
        _download_into(url, partial, timeout, deadline)
    except BaseException:
        partial.unlink(missing_ok=True)  # nothing half-written stays, even on Ctrl-C
        raise
    partial.replace(dest)


def _download_into(url: str, path: Path, timeout: float, deadline: float) -> None:
    if url.startswith("file://"):
        shutil.copyfile(Path(unquote(urlparse(url).path)), path)
        return
    partial, ends = _Partial(path), time.monotonic() + deadline
    partial.restart()
    for pause in (*_PAUSES, None):
        partial.got = 0
        try:
            _download_part(url, partial, timeout, ends - time.monotonic())
            return
        except HttpError as exc:
            # a server that went quiet is asked again only if it sent something this time
            stalled = exc.timed_out and not partial.got
            if not exc.retryable or stalled or pause is None or ends - time.monotonic() <= pause:
                raise
            _say_retry(url, partial, exc, pause)
            time.sleep(pause)


def _download_part(url: str, partial: _Partial, timeout: float, deadline: float) -> None:
    """One request for what `partial` lacks; an HttpError (`retryable` where asking again may
    get the rest) when the answer is not the whole rest."""
    ask = _Ask(url, "GET", _env(None), timeout, deadline, partial=partial)
    code = _request(ask, tick=lambda: _show_progress(url, partial)).status
    if code == 416:  # the range is past the file's end: it changed, or shrank
        partial.restart()
        raise HttpError("HTTP 416 (the file changed on the server)", retryable=True)
    if code >= 400:
        raise HttpError(f"HTTP {code}", retryable=code in _RETRY_STATUS)
    if partial.total is not None and partial.size != partial.total:
        raise HttpError(
            f"the answer ended at {partial.size} of {partial.total} bytes", retryable=True
        )


def _into_partial(answer: requests.Response, partial: _Partial, stop: threading.Event) -> None:
    """The answer's body into the partial file: after what it holds for the rest it asked for
    (206 from where it stopped), from the start for a whole answer (200: the server ignored the
    Range, or the file changed since: If-Range)."""
    found = _CONTENT_RANGE.match(answer.headers.get("Content-Range", ""))
    start = int(found[1]) if answer.status_code == 206 and found else 0
    if answer.status_code == 206 and (found is None or start != partial.size):
        partial.restart()  # another part than asked for: of no use
        raise HttpError("the server answered another range than asked", retryable=True)
    length = answer.headers.get("Content-Length", "")
    with partial.path.open("r+b") as sink:
        sink.seek(start)
        sink.truncate()
        partial.size = start
        partial.validator = _validator(answer.headers)
        partial.total = start + int(length) if length.isdigit() else None
        for chunk in answer.iter_content(_CHUNK):
            if stop.is_set():
                return
            sink.write(chunk)
            partial.size += len(chunk)
            partial.got += len(chunk)


def _validator(headers: Mapping[str, str]) -> str | None:
    """What If-Range may ask by: a strong ETag, else Last-Modified (RFC 9110 13.1.5)."""
    etag = headers.get("ETag", "")
    if etag.startswith('"'):
        return etag
    return headers.get("Last-Modified") or None


def _say_retry(url: str, partial: _Partial, exc: HttpError, pause: float) -> None:
    name = urlparse(url).path.rsplit("/", 1)[-1] or redact(url)
    how = "resuming" if partial.headers() else "starting over"
    emit(
        f"download of {name} stopped at {_size(partial.size)} ({exc.reason}): {how} in {pause:g} s",
        kind=("note", "download"),
    )


def _show_progress(url: str, partial: _Partial) -> None:
    name = urlparse(url).path.rsplit("/", 1)[-1] or redact(url)
    of = f" of {_size(partial.total)}" if partial.total else ""
    emit(f"{name}: {_size(partial.size)}{of}", kind=("live", "download"))


def _size(count: int) -> str:
    return f"{count / 1e9:.2f} GB" if count >= 1e9 else f"{count / 1e6:.1f} MB"
