"""Per-stage hashed requirements files, for `pip install --require-hashes --no-deps -r FILE`."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from verl_bootstrap.lock.export.common import ExportEntry, verl_note
from verl_bootstrap.lock.format import LockedStage, Lockfile
from verl_bootstrap.lock.lookup import stage_index
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.redact import drop_login, holds_secret, redact
from verl_bootstrap.safety.shellquote import one_line

__all__ = ["write_requirements"]


def write_requirements(
    lock: Lockfile, entries: Sequence[ExportEntry], settings: IndexSettings, folder: Path
) -> list[Path]:
    """One file per stage, named NN-STAGE.txt in install order; returns them."""
    written = []
    hashed = [s for s in lock.stages if s.kind != "install-verl"]
    for number, stage in enumerate(hashed, start=1):
        mine = [e for e in entries if e.stage == stage.id]
        lines = _header(lock, stage, f"stage {number} of {len(hashed)}")
        lines += _index_lines(settings, stage_index(stage))
        lines += [_line(e) for e in mine]
        text = "".join(f"{_one(line, stage.id)}\n" for line in lines)
        path = folder / f"{number:02d}-{stage.id}.txt"
        atomic_write(path, text)
        path.chmod(0o644)
        written.append(path)
    return written


def _header(lock: Lockfile, stage: LockedStage, position: str) -> list[str]:
    flags = shlex.join(["--require-hashes", *stage.options])
    lines = [
        f"# Exported by verl-bootstrap from the {lock.profile} lockfile ({lock.cuda.variant}, "
        f"{lock.platform}, Python {lock.python}): {position}, {stage.id!r}.",
        f"# Install the stages in order: pip install {flags} -r THIS_FILE",
        f"# {verl_note(lock)}.",
    ]
    if stage.env:
        env = shlex.join(f"{k}={v}" for k, v in sorted(stage.env.items()))
        lines.append(f"# Set these variables for this stage: {env}")
    return lines


def _one(line: str, stage: str) -> str:
    """pip reads every line of the file: a value written into one cannot add another."""
    one_line(line.replace(" \\\n    --hash", " --hash"), f"a line of the {stage} requirements")
    return line


def _index_lines(settings: IndexSettings, index: str | None) -> list[str]:
    lines = []
    if settings.index_url:
        lines.append(_url_line("--index-url", settings.index_url))
    stage_url = settings.url_of(index) if index else None
    for url in [*([stage_url] if stage_url else []), *settings.extra_index_urls]:
        lines.append(_url_line("--extra-index-url", url))
    lines.extend(_url_line("--find-links", link) for link in settings.find_links)
    return lines


def _url_line(flag: str, url: str) -> str:
    """`flag URL` without its credentials: pip takes a login for the host from the netrc; a URL
    whose secret is elsewhere (a `?token=`) is not written, only named (masked) in a comment."""
    bare = drop_login(url)
    if holds_secret(bare):
        variable = {"--index-url": "PIP_INDEX_URL", "--find-links": "PIP_FIND_LINKS"}
        return (
            f"# {flag} {redact(bare)} holds a credential and is not written here: give it to "
            f"pip in {variable.get(flag, 'PIP_EXTRA_INDEX_URL')}"
        )
    return f"{flag} {shlex.quote(bare)}"


def _line(entry: ExportEntry) -> str:
    hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in entry.dist.hashes)
    return f"{entry.dist.name}=={entry.dist.version}{hashes}"
