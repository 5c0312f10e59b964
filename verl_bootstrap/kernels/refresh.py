"""Ask each declared prebuilt source what it publishes now, and rewrite the recorded lists: an
index's page of each kernel distribution (its PEP 691 JSON, else its PEP 503 HTML), a release
source's published list where the record names one (`list`), else a HEAD of each recorded asset
and of the asset each shipped stack's key names. Needs the network; the plan and
`kernels coverage` never call it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.utils import canonicalize_name

from verl_bootstrap.httpclient import HttpError, status
from verl_bootstrap.kernels.coverage import PLATFORMS, stack_keys
from verl_bootstrap.kernels.indexpage import PageError, index_wheels, list_wheels
from verl_bootstrap.kernels.key import render_template
from verl_bootstrap.kernels.record import KernelRecord, RecordedSource, listed_wheels
from verl_bootstrap.kernels.sources import declared_sources, pinned_version
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.profile.kernel import PrebuiltSource
from verl_bootstrap.profile.load import PROFILES_DIR, list_profiles, load_profile

__all__ = ["Refreshed", "declared", "refresh_record", "write_record"]

_HEADER = """\
# The prebuilt kernel wheels each declared source publishes, as recorded from the source's own
# published list (see `from`). The plan and `verl-bootstrap kernels coverage` read it offline;
# `verl-bootstrap kernels coverage --refresh` asks each source again (needs the network) and
# rewrites this file. Each list: the newest release first.
"""


class Wanted:
    """What the shipped profiles ask of one source: its declaration, the distributions and
    versions their stages pin, and the URLs each stack's key names."""

    def __init__(self, source: PrebuiltSource) -> None:
        self.source = source
        self.versions: dict[str, set[str]] = {}
        self.rendered: set[str] = set()


def declared(search: Path = PROFILES_DIR) -> dict[str, Wanted]:
    """Every source the shipped profiles declare, with what their stacks want of it."""
    out: dict[str, Wanted] = {}
    for name in list_profiles(search):
        profile = load_profile(name, search=search)
        for variant in (v for v in profile.cuda_variants if v != "cpu"):
            for platform in PLATFORMS:
                for _, packages, kernel, key in stack_keys(profile, variant, platform):
                    for source in declared_sources(kernel):
                        wanted = out.setdefault(source.id, Wanted(source))
                        dist = source.distribution or kernel.distribution
                        version = pinned_version(packages, dist, key)
                        if version is None:
                            continue
                        wanted.versions.setdefault(dist, set()).add(version)
                        url = render_template(source.release or "", version, key)
                        if source.release and url:
                            wanted.rendered.add(url)
    return out


@dataclass(frozen=True)
class Refreshed:
    """What a refresh found: a line per source, the sources it could not ask (their recorded
    lists kept as they were), and the record it wrote (or, with write=False, would write)."""

    notes: tuple[str, ...]
    failed: tuple[str, ...]
    record: KernelRecord


def refresh_record(
    path: Path,
    record: KernelRecord,
    *,
    search: Path = PROFILES_DIR,
    today: dt.date | None = None,
    write: bool = True,
) -> Refreshed:
    """Ask every declared source again and rewrite `path` (with `write`); a source that could
    not be asked in full keeps its recorded list: an unreachable host is never "0 wheels"."""
    notes, failed = [], []
    sources = dict(record.sources)
    day = today or dt.date.today()
    for name, wanted in sorted(declared(search).items()):
        old = sources.get(name)
        try:
            wheels, origin = _ask(wanted, old)
        except (HttpError, PageError) as exc:
            notes.append(f"{name}: not refreshed ({exc}); the recorded list is kept")
            failed.append(name)
            continue
        before = set(old.wheels) if old else set()
        added, gone = len(set(wheels) - before), len(before - set(wheels))
        notes.append(f"{name}: {len(wheels)} wheel(s), {added} new, {gone} gone")
        sources[name] = RecordedSource(
            recorded=day, origin=origin, wheels=tuple(wheels), list=old.list if old else None
        )
    fresh = KernelRecord(schema_version=1, sources=sources)
    if write:
        write_record(path, fresh)
    return Refreshed(notes=tuple(notes), failed=tuple(failed), record=fresh)


def _ask(wanted: Wanted, old: RecordedSource | None) -> tuple[list[str], str]:
    """(the wheels the source publishes now that the profiles may take, where that was read)."""
    source = wanted.source
    if source.index is not None:
        wheels = []
        for dist in sorted(wanted.versions):
            page = source.index.rstrip("/") + f"/{canonicalize_name(dist)}/"
            wheels.extend(index_wheels(page))
        return wheels, f"its index {source.index}, each kernel distribution's page"
    if old is not None and old.list:
        found = [u for u in list_wheels(old.list) if _wanted(wanted, u)]
        return list(dict.fromkeys(found)), f"its published list {old.list}"
    candidates = list(dict.fromkeys([*(old.wheels if old else ()), *sorted(wanted.rendered)]))
    answers = {u: _answers(u) for u in candidates}
    unreached = [u for u, said in answers.items() if said is None]
    if unreached:  # no answer is not "gone": the list cannot be told from this run
        raise HttpError(f"{len(unreached)} of {len(candidates)} asset(s) did not answer")
    there = [u for u, said in answers.items() if said]
    return there, "a HEAD of each recorded release asset and of each asset a shipped stack names"


def _wanted(wanted: Wanted, url: str) -> bool:
    """A wheel of a version the profiles pin, for a platform they ship."""
    one = RecordedSource(recorded=dt.date.today(), origin="", wheels=(url,))
    probe = KernelRecord(schema_version=1, sources={wanted.source.id: one})
    for dist, versions in wanted.versions.items():
        for wheel in listed_wheels(wanted.source, dist, probe) or ():
            if wheel.version in versions and wheel.key.platform in PLATFORMS:
                return True
    return False


def _answers(url: str, check: Callable[..., int] = status) -> bool | None:
    """True: the asset is there; False: the host says it is not (a 4xx); None: no answer (no
    network, a refused connection, a server error)."""
    try:
        code = check(url, timeout=30)
    except HttpError:
        return None
    return None if code >= 500 else code < 400


def write_record(path: Path, record: KernelRecord) -> None:
    """The record as YAML, with its header."""
    data = record.model_dump(mode="json", by_alias=True, exclude_none=True)
    text = _HEADER + yaml.safe_dump(data, sort_keys=False, width=100)
    atomic_write(path, text)
