"""What is installed in an env, read from its dist-info folders (no interpreter start-up needed)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import unquote, urlparse

from verl_bootstrap.safety import jsontext

__all__ = ["Dist", "canonical", "editable_path", "installed", "site_packages"]


@dataclass(frozen=True)
class Dist:
    """One installed distribution."""

    name: str  # canonical (PEP 503) name
    version: str
    record_sha256: str | None  # digest of its RECORD: changes when another build replaces it
    direct_url: dict[str, object] | None = None  # PEP 610: editable installs and VCS sources


def canonical(name: str) -> str:
    """PEP 503 normalised name."""
    return re.sub(r"[-_.]+", "-", name).lower()


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
    with meta.open(encoding="utf-8", errors="replace") as fh:
        headers = HeaderParser().parse(fh, headersonly=True)
    name, version = headers.get("Name"), headers.get("Version")
    if not name or not version:
        return None
    record = info / "RECORD"
    digest = hashlib.sha256(record.read_bytes()).hexdigest() if record.is_file() else None
    return Dist(canonical(name), version, digest, _direct_url(info))


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
