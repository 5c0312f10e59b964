"""Reachability of every index, channel and git URL the plan uses, as the user's settings see it."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from urllib.parse import unquote, urlparse

from verl_bootstrap import proc
from verl_bootstrap.httpclient import HttpError, proxies_for, proxy_for, status
from verl_bootstrap.machine.host.netfaults import SITE_CONFIG, net_fault
from verl_bootstrap.plan.doctor.inputs import Context, exact_env
from verl_bootstrap.plan.doctor.results import CheckResult, fail, ok, skipped, warn
from verl_bootstrap.redact import redact

__all__ = ["Reach", "check_network", "probe_url"]

_WORKERS = 8
# A URL that only timed out gets one more, longer try: a loaded host or a slow mirror is not an
# unreachable one, and refusing an install for a slow first answer would be wrong.
RETRY_FACTOR = 3.0
_NO_ANSWER = "no answer within"
_LINE = "\n    "  # each URL on its own line: a git host, an index and a channel fail apart


@dataclass(frozen=True)
class Reach:
    """What probing one URL found: 'ok', 'warn' (answers but refuses us) or 'fail'."""

    label: str
    url: str  # credentials masked
    status: str
    detail: str
    via_proxy: str | None = None


def _is_git(label: str, url: str) -> bool:
    return (
        label.startswith("git")
        or url.startswith(("git+", "git://", "ssh://", "git@"))
        or url.rstrip("/").endswith(".git")
    )


def _local(label: str, url: str) -> Reach | None:
    """file:// URLs and plain paths are folders: they exist or they do not."""
    bare = url.removeprefix("git+")
    if bare.startswith("file://"):
        path = Path(unquote(urlparse(bare).path))
    elif bare.startswith(("/", ".", "~")):
        path = Path(bare).expanduser()
    elif "://" not in bare and not bare.startswith("git@"):
        return Reach(label, redact(url), "fail", "neither a URL nor a path")
    else:
        return None
    status = "ok" if path.exists() else "fail"
    return Reach(label, redact(url), status, "local path" + ("" if path.exists() else " missing"))


def _git(label: str, url: str, environ: Mapping[str, str], timeout: float) -> Reach:
    env = exact_env(environ) | {"GIT_TERMINAL_PROMPT": "0"}
    args = ["git", "ls-remote", url.removeprefix("git+"), "HEAD"]
    try:
        done = proc.capture(args, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Reach(label, redact(url), "fail", f"{_NO_ANSWER} {timeout:g} s")
    except OSError as exc:
        return Reach(label, redact(url), "fail", f"git does not run: {exc}")
    if done.returncode == 0:
        return Reach(label, redact(url), "ok", "git answers")
    last = (done.stderr.strip().splitlines() or ["git ls-remote failed"])[-1]
    fault = net_fault(done.stderr, url)
    return Reach(label, redact(url), "fail", fault.what if fault else redact(last))


def _http(label: str, url: str, environ: Mapping[str, str], timeout: float) -> Reach:
    proxy = proxy_for(url, environ)
    shown = redact(url)
    try:
        code = status(url, environ=environ, timeout=timeout)
    except HttpError as exc:
        detail = f"{_NO_ANSWER} {timeout:g} s" if exc.timed_out else exc.reason
        return Reach(label, shown, "fail", detail, proxy)
    if code < 400:
        return Reach(label, shown, "ok", f"HTTP {code}", proxy)
    if code in (401, 403):
        return Reach(label, shown, "warn", f"HTTP {code}: needs credentials", proxy)
    return Reach(label, shown, "fail", f"HTTP {code}", proxy)


def _second_try(reach: Reach) -> Reach:
    if reach.status == "ok":
        return replace(reach, detail=f"{reach.detail} (slow: answered on the second try)")
    return reach


def probe_url(label: str, url: str, environ: Mapping[str, str], timeout: float) -> Reach:
    """Probe one URL: a local path, a git remote (`git ls-remote`), or an HTTP(S) endpoint."""
    local = _local(label, url)
    if local is not None:
        return local
    probe = _git if _is_git(label, url) else _http
    reach = probe(label, url, environ, timeout)
    if reach.detail.startswith(_NO_ANSWER):
        reach = _second_try(probe(label, url, environ, timeout * RETRY_FACTOR))
    return reach


def _optional(ctx: Context, label: str) -> bool:
    if label in ctx.inputs.optional_urls:
        return True
    indexes = ctx.profile.indexes if ctx.profile else {}
    name = label.split(":", 1)[-1]
    return name in indexes and indexes[name].optional


def _replacement(reach: Reach) -> str:
    kind = reach.label.split(":", 1)[0]
    if reach.detail.startswith("local path") or reach.detail.startswith("neither"):
        return f"create {reach.url} or point the plan at a folder or URL that exists"
    fault = net_fault(reach.detail, reach.url)
    if fault is not None and fault.kind in ("tls", "proxy"):  # a mirror would not help
        return fault.fix()
    if kind == "git" or reach.url.endswith(".git"):
        return (
            f"a mirror of it: `mirrors.git` in your site config ({SITE_CONFIG}), or "
            f"git config --global url.<mirror>.insteadOf {reach.url}"
        )
    if kind == "channel":
        return (
            f"a mirror (or local folder) in place of {reach.url}: pass --channel URL_OR_PATH "
            "(repeatable; it replaces the profile's channels)"
        )
    name = reach.label.split(":", 1)[-1]
    return (
        f"a mirror for {reach.label}: `mirrors.pypi.index_url` (the default index) or "
        f"`mirrors.indexes.{name}` in your site config ({SITE_CONFIG}), or --index {name}=URL; "
        "PIP_INDEX_URL / UV_DEFAULT_INDEX for the default index"
    )


def _fix(ctx: Context, bad: list[Reach]) -> str:
    fixes = [f"{r.label}: {_replacement(r)}" for r in bad]
    unreached = [r for r in bad if r.status == "fail" and not _trust_or_proxy(r)]
    if unreached and not proxies_for("https://example.invalid", ctx.environ):
        fixes.append(
            "behind a proxy, set `network.proxy.https` in your site config (or HTTPS_PROXY; "
            "NO_PROXY for local mirrors)"
        )
    return _LINE.join(dict.fromkeys(fixes))


def _trust_or_proxy(reach: Reach) -> bool:
    """The host answered, but its certificate is not trusted or the proxy refused: no mirror or
    proxy setting for an unreachable host applies."""
    fault = net_fault(reach.detail, reach.url)
    return fault is not None and fault.kind in ("tls", "proxy")


def check_network(ctx: Context) -> CheckResult:
    """Each index, channel and git URL the plan uses answers, with the user's proxy settings."""
    urls = ctx.inputs.urls
    if not urls:
        return skipped("network", "no URLs to probe")
    timeout, environ = ctx.inputs.network_timeout, ctx.environ
    with ThreadPoolExecutor(max_workers=min(_WORKERS, len(urls))) as pool:
        reaches = list(pool.map(lambda lu: probe_url(lu[0], lu[1], environ, timeout), urls))
    data = {"urls": [asdict(r) for r in reaches]}
    bad = [r for r in reaches if r.status != "ok"]
    required = [r for r in bad if r.status == "fail" and not _optional(ctx, r.label)]
    if not bad:
        return ok("network", f"all {len(reaches)} URLs answer", **data)
    found = f"{len(reaches) - len(bad)} of {len(reaches)} URLs answer:" + "".join(
        f"{_LINE}{r.label} ({r.url}): {r.detail}" for r in bad
    )
    check = fail if required else warn
    return check("network", found, _fix(ctx, bad), **data)
