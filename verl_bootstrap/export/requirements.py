"""Per-stage hashed requirements files, for `pip install --require-hashes --no-deps -r FILE`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from verl_bootstrap.export.common import ExportEntry, verl_note
from verl_bootstrap.host.indexes import IndexSettings
from verl_bootstrap.lockfile.lookup import stage_index
from verl_bootstrap.lockfile.model import LockedStage, Lockfile
from verl_bootstrap.paths import atomic_write

__all__ = ["write_requirements"]


def write_requirements(
    lock: Lockfile, entries: Sequence[ExportEntry], settings: IndexSettings, folder: Path
) -> list[Path]:
    """One file per stage, named NN-STAGE.txt in install order; returns them."""
    written = []
    hashed = [s for s in lock.stages if s.kind != "install-verl"]
    for number, stage in enumerate(hashed, start=1):
        mine = [e for e in entries if e.stage == stage.id]
        text = _header(lock, stage, f"stage {number} of {len(hashed)}")
        text += _index_lines(settings, stage_index(stage))
        text += "".join(_line(e) for e in mine)
        path = folder / f"{number:02d}-{stage.id}.txt"
        atomic_write(path, text)
        path.chmod(0o644)
        written.append(path)
    return written


def _header(lock: Lockfile, stage: LockedStage, position: str) -> str:
    flags = " ".join(["--require-hashes", *stage.options])
    lines = [
        f"# Exported by verl-bootstrap from the {lock.profile} lockfile ({lock.cuda.variant}, "
        f"{lock.platform}, Python {lock.python}): {position}, {stage.id!r}.",
        f"# Install the stages in order: pip install {flags} -r THIS_FILE",
        f"# {verl_note(lock)}.",
    ]
    if stage.env:
        env = " ".join(f"{k}={v}" for k, v in sorted(stage.env.items()))
        lines.append(f"# Set these variables for this stage: {env}")
    return "\n".join(lines) + "\n"


def _index_lines(settings: IndexSettings, index: str | None) -> str:
    lines = []
    if settings.index_url:
        lines.append(f"--index-url {settings.index_url}")
    stage_url = settings.url_of(index) if index else None
    for url in [*([stage_url] if stage_url else []), *settings.extra_index_urls]:
        lines.append(f"--extra-index-url {url}")
    lines.extend(f"--find-links {link}" for link in settings.find_links)
    return "".join(f"{line}\n" for line in lines)


def _line(entry: ExportEntry) -> str:
    hashes = "".join(f" \\\n    --hash=sha256:{h}" for h in entry.dist.hashes)
    return f"{entry.dist.name}=={entry.dist.version}{hashes}\n"
