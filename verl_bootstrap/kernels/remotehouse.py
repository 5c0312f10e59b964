"""A lab wheelhouse served at an index URL (the folder behind any web server): read, never
written. Its `index.json` and wheels are fetched through the one HTTP client, which takes
credentials from the URL's userinfo or the user's netrc (they never reach a command line and
are redacted wherever the URL is shown).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import quote, urlsplit

from verl_bootstrap.errors import InputError
from verl_bootstrap.httpclient import HttpError, download, fetch
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.wheelhouse import (
    INDEX_NAME,
    Entry,
    Wheelhouse,
    parse_index,
    read_index,
)
from verl_bootstrap.kernels.wheeltags import HouseCheck, contradictions
from verl_bootstrap.paths import file_sha256
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.shapes import inside

__all__ = ["AnyWheelhouse", "RemoteWheelhouse", "is_url"]

_INDEX_LIMIT = 16 * 1024 * 1024  # an index far larger than any lab's is not read


def is_url(configured: str) -> bool:
    """The site config names the wheelhouse by an http(s) URL."""
    return configured.startswith(("https://", "http://"))


class RemoteWheelhouse:
    """The wheelhouse at `url`."""

    def __init__(self, url: str) -> None:
        try:
            parts = urlsplit(url)
            _ = parts.port  # a port that is not a number is only found when asked for
        except ValueError as exc:
            raise InputError(
                f"wheelhouse {redact(url)!r} is not a valid URL ({exc})",
                hint="fix the site config's `wheelhouse:` (a folder or an http(s):// URL)",
            ) from None
        if not parts.hostname:
            raise InputError(
                f"wheelhouse {redact(url)!r} names no host",
                hint="fix the site config's `wheelhouse:`",
            )
        self.root = url.rstrip("/")

    def writable(self) -> bool:
        """Never: a wheelhouse URL is only read."""
        return False

    def shown(self) -> str:
        """The URL as plans and logs name it (credentials redacted)."""
        return redact(self.root)

    def entries(self) -> tuple[Entry, ...]:
        """What its index lists (none when it has no index yet or does not answer); a bad entry
        is skipped with a note."""
        text = self._index_text()
        return tuple(parse_index(text, f"{self.shown()}/{INDEX_NAME}")) if text else ()

    def _index_text(self) -> str:
        try:
            body = fetch(f"{self.root}/{INDEX_NAME}", timeout=30, limit=_INDEX_LIMIT)
        except HttpError:
            return ""
        return body.decode("utf-8", "replace")

    def local_wheel(self, file: str, work: Path) -> Path:
        """The listed wheel `file`, downloaded into `work` (its sha256 is checked by the caller)."""
        dest = inside(work, file, what="wheel file name")
        try:
            download(f"{self.root}/{quote(file)}", dest, timeout=600)
        except (OSError, HttpError) as exc:
            raise InputError(
                f"could not fetch {file} from the wheelhouse {self.shown()}: {exc}"
            ) from None
        return dest

    def publish(self, wheel: Path, key: BuildKey) -> Entry:
        """Refused: nothing is written to a wheelhouse URL."""
        raise InputError(
            f"the wheelhouse {self.shown()} is an index URL: it is read, never written",
            hint="publish to the folder behind it (`wheelhouse add --wheelhouse FOLDER`)",
        )

    def check(self) -> HouseCheck:
        """Every problem found by fetching and rehashing each listed wheel (and each entry
        that readers skip), and each wheel whose tags or contents contradict its key."""
        text = self._index_text()
        rows = read_index(text, f"{self.shown()}/{INDEX_NAME}") if text else []
        found = HouseCheck([f"{row} (skipped)" for row in rows if isinstance(row, str)])
        with tempfile.TemporaryDirectory(prefix="verl-wheelhouse-") as tmp:
            for entry in self.entries():
                try:
                    path = self.local_wheel(entry.file, Path(tmp))
                except InputError as exc:
                    found.problems.append(f"{entry.file}: {exc}")
                    continue
                if file_sha256(path) != entry.sha256:
                    found.problems.append(f"{entry.file}: sha256 differs from the index")
                else:
                    found.misfiled.extend(contradictions(path, entry.key, file=entry.file))
                path.unlink()
        return found


AnyWheelhouse = Wheelhouse | RemoteWheelhouse
