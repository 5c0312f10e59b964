"""A wheel's own requirements (the Requires-Dist of its METADATA), read where the index serves it
without downloading the wheel: the zip's directory and the one member are asked for by HTTP range,
as uv does for an index that serves no PEP 658 metadata file. A find-links wheel is read from its
folder. What was read is kept per user under the wheel's sha256 (`wheel-metadata/` in the cache
folder), so a second lock or `lock --check` asks the index for nothing it already read.

The requirements are what the file at the index's URL says: the bytes are not hashed (a range read
never sees the whole file). They decide only which of a lock's pins break another's bounds.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import unquote, urlparse

from verl_bootstrap.httpclient import HttpError, fetch_range
from verl_bootstrap.paths import atomic_write

__all__ = ["WheelFile", "requires_dist", "served_wheels", "wheel_requirements"]

_BLOCK = 1 << 18  # one range request reads 256 KiB: a wheel's directory is usually in the last
_LIMIT = 1 << 22  # a METADATA larger than 4 MiB is not one
_MOST = 1 << 26  # read no more than 64 MiB of one wheel (torch's directory is under 2 MiB)
_WORKERS = 8
_TRIES = 3


@dataclass(frozen=True)
class WheelFile:
    """One wheel of a locked distribution, as the index serves it."""

    name: str  # the distribution's canonical name
    url: str
    sha256: str
    size: int | None = None


class _RangeFile(io.RawIOBase):
    """A remote file read by HTTP range, a block at a time (zipfile seeks to its end first)."""

    def __init__(self, url: str, size: int) -> None:
        super().__init__()
        self.url, self.size, self.at = url, size, 0
        self.blocks: dict[int, bytes] = {}

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.at, io.SEEK_END: self.size}[whence]
        self.at = max(0, base + offset)
        return self.at

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), max(0, self.size - self.at))
        data = b"".join(self._block(n) for n in self._spanned(wanted))
        start = self.at - (self.at // _BLOCK) * _BLOCK
        chunk = data[start : start + wanted]
        buffer[: len(chunk)] = chunk
        self.at += len(chunk)
        return len(chunk)

    def _spanned(self, wanted: int) -> range:
        return range(self.at // _BLOCK, (self.at + max(wanted, 1) - 1) // _BLOCK + 1)

    def _block(self, number: int) -> bytes:
        if number not in self.blocks:
            if len(self.blocks) * _BLOCK >= _MOST:
                raise ValueError("the wheel's directory is too large to read by range")
            first = number * _BLOCK
            last = min(self.size, first + _BLOCK) - 1
            self.blocks[number] = fetch_range(self.url, first, last)
        return self.blocks[number]


def requires_dist(metadata: str) -> tuple[str, ...]:
    """The Requires-Dist lines of a METADATA text."""
    headers = HeaderParser().parsestr(metadata, headersonly=True)
    return tuple(str(line).strip() for line in headers.get_all("Requires-Dist") or ())


def wheel_requirements(
    wheels: Sequence[WheelFile], cache: Path, *, offline: bool = False
) -> dict[str, tuple[str, ...] | None]:
    """name -> the wheel's Requires-Dist lines (None: it could not be read here: offline and not
    kept, or the index answered no range)."""
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        found = pool.map(lambda w: _requirements(w, cache, offline), wheels)
        return {w.name: lines for w, lines in zip(wheels, found, strict=True)}


def _requirements(wheel: WheelFile, cache: Path, offline: bool) -> tuple[str, ...] | None:
    kept = cache / f"{wheel.sha256}.METADATA"
    if kept.is_file():
        return requires_dist(kept.read_text(encoding="utf-8", errors="replace"))
    if offline and not wheel.url.startswith("file:"):
        return None
    for _ in range(_TRIES):  # an index under many range requests at once drops one now and then
        try:
            text = _read_metadata(wheel)
        except HttpError:
            continue
        except (zipfile.BadZipFile, OSError, KeyError, ValueError):
            return None
        atomic_write(kept, text)
        return requires_dist(text)
    return None


def _read_metadata(wheel: WheelFile) -> str:
    """The METADATA member of the wheel at its URL (a local file, or by range)."""
    parsed = urlparse(wheel.url)
    if parsed.scheme == "file":
        source: io.RawIOBase | Path = Path(unquote(parsed.path))
    elif wheel.size:
        source = _RangeFile(wheel.url, wheel.size)
    else:
        raise ValueError("the index gives no size")
    with zipfile.ZipFile(source) as zipped:
        member = _metadata_member(zipped.infolist())
        if member.file_size > _LIMIT:
            raise ValueError("METADATA too large")
        return zipped.read(member).decode("utf-8", errors="replace")


def _metadata_member(members: Sequence[zipfile.ZipInfo]) -> zipfile.ZipInfo:
    found = [m for m in members if _is_metadata(m.filename)]
    if not found:
        raise KeyError("no .dist-info/METADATA")
    return found[0]


def _is_metadata(name: str) -> bool:
    top, _, rest = name.partition("/")
    return top.endswith(".dist-info") and rest == "METADATA"


def served_wheels(
    hashes: Mapping[str, Sequence[str]], served: Mapping[str, Sequence[WheelFile]]
) -> list[WheelFile]:
    """One served wheel per distribution: the first whose sha256 the lock has."""
    out = []
    for name, locked in sorted(hashes.items()):
        match = next((w for w in served.get(name, ()) if w.sha256 in locked), None)
        if match is not None:
            out.append(match)
    return out
