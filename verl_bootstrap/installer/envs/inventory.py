"""What is installed in an env, read from its dist-info folders (no interpreter start-up needed)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from verl_bootstrap.safety import jsontext

__all__ = ["Dist", "editable_path", "installed", "site_packages"]


@dataclass(frozen=True)
class Dist:
    """One installed distribution."""

    name: str  # canonical (PEP 503) name
    version: str
    record_sha256: str | None  # digest of its RECORD: changes when another build replaces it
    direct_url: dict[str, object] | None = None  # PEP 610: editable installs and VCS sources


def site_packages(prefix: Path) -> list[Path]:
    """The env's site-packages folders (venv and conda layouts are the same on Linux)."""
    return sorted(prefix.glob("lib/python3*/site-packages"))


def installed(prefix: Path) -> dict[str, Dist]:
    """Every distribution installed in the env at `prefix`, by canonical name."""
    found: dict[str, Dist] = {}
    for folder in site_packages(prefix):
        for info in folder.glob("*.dist-info"):
            dist = _read(info)
            if dist is not None:
                found[dist.name] = dist
    return found


def _read(info: Path) -> Dist | None:
    meta = info / "METADATA"
    if not meta.is_file():
        return None
    name, version = _name_and_version(meta)
    if not name or not version:
        return None
    record = info / "RECORD"
    digest = hashlib.sha256(record.read_bytes()).hexdigest() if record.is_file() else None
    return Dist(canonicalize_name(name), version, digest, _direct_url(info))


def _name_and_version(meta: Path) -> tuple[str | None, str | None]:
    """The Name and Version headers of a METADATA file. Read line by line up to the two (or the
    end of the headers): every run reads every distribution's, and a full e-mail parse of each
    took most of an intact re-run's check."""
    found: dict[str, str] = {}
    with meta.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():  # the headers end; the description follows
                break
            if line[0] in " \t":  # a folded header's next line (a long License:), no header
                continue
            key, colon, value = line.partition(":")
            key = key.lower()
            if colon and key in ("name", "version") and key not in found:
                found[key] = value.strip()
                if len(found) == 2:
                    break
    return found.get("name"), found.get("version")


def _direct_url(info: Path) -> dict[str, object] | None:
    path = info / "direct_url.json"
    if not path.is_file():
        return None
    try:
        data = jsontext.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def editable_path(direct_url: Mapping[str, object] | None) -> Path | None:
    """The folder an editable install points at, from its PEP 610 direct_url.json, or None."""
    info = direct_url or {}
    dir_info = info.get("dir_info")
    if not (isinstance(dir_info, dict) and dir_info.get("editable")):
        return None
    url = urlparse(str(info.get("url", "")))
    return Path(unquote(url.path)) if url.scheme == "file" else None
