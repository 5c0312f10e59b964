"""The tool's own wheel rebuilt from its installed files, for a tool installed from a wheel (pip,
pipx, `uv tool install`): what an installer puts in place is a wheel's contents, listed with their
hashes in the distribution's RECORD, so the wheel is those files packed again.

What an installer adds is left out (INSTALLER, REQUESTED, direct_url.json, the console scripts,
which the next installer writes again from entry_points.txt, and byte-code); the data files go
back under `NAME-VERSION.data/data/`, and RECORD is written anew. Each file is checked against
its RECORD hash on the way, so a changed installed file is refused rather than packed.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path, PurePosixPath

from verl_bootstrap.errors import Refused

__all__ = ["DIST_NAME", "installed_requirements", "repack_installed"]

DIST_NAME = "verl-bootstrap"
_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the same files give the same wheel


def repack_installed(out: Path) -> Path:
    """verl-bootstrap's wheel, packed from its installed distribution into the folder `out`."""
    dist = metadata.distribution(DIST_NAME)
    base = f"verl_bootstrap-{dist.version}"
    members = sorted(_members(dist, base), key=lambda m: m[0])
    wheel = out / f"{base}-py3-none-any.whl"
    rows: list[tuple[str, str, str]] = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for arcname, data in members:
            _add(archive, arcname, data)
            rows.append((arcname, _record_hash(data), str(len(data))))
        record = f"{base}.dist-info/RECORD"
        _add(archive, record, _record_text([*rows, (record, "", "")]).encode())
    return wheel


def installed_requirements() -> list[str]:
    """The installed distribution's own requirements (those of an extra left out)."""
    from packaging.requirements import Requirement  # noqa: PLC0415 - only bundling needs it

    wanted = []
    for line in metadata.requires(DIST_NAME) or []:
        marker = Requirement(line).marker
        if marker is None or "extra" not in str(marker):
            wanted.append(line)
    return wanted


def _members(dist: metadata.Distribution, base: str) -> list[tuple[str, bytes]]:
    """(name in the wheel, bytes) of every installed file an installer did not make."""
    scripts, data_root = _scheme_of(Path(str(dist.locate_file(""))).resolve())
    found = []
    for entry in dist.files or ():
        path = Path(str(dist.locate_file(entry))).resolve()
        name = _wheel_name(PurePosixPath(str(entry)), path, scripts, data_root, base)
        if name is not None:
            found.append((name, _checked(path, entry)))
    if not any(name.endswith(".dist-info/METADATA") for name, _ in found):
        raise _cannot(f"its RECORD in {dist.locate_file('')} lists no METADATA")
    return found


def _scheme_of(site: Path) -> tuple[Path, Path]:
    """(scripts, data) folders of the install scheme whose library folder is `site` (a venv,
    the interpreter's prefix, or the user's ~/.local for `pip install --user`)."""
    for scheme in sysconfig.get_scheme_names():
        try:
            paths = sysconfig.get_paths(scheme)
        except KeyError:
            continue
        libs = {Path(paths[k]).resolve() for k in ("purelib", "platlib") if k in paths}
        if site in libs:
            return Path(paths["scripts"]).resolve(), Path(paths["data"]).resolve()
    return Path(sysconfig.get_path("scripts")).resolve(), Path(sysconfig.get_path("data")).resolve()


def _wheel_name(
    entry: PurePosixPath, path: Path, scripts: Path, data_root: Path, base: str
) -> str | None:
    """Where an installed file goes in the wheel; None for what an installer makes."""
    if entry.suffix == ".pyc" or "__pycache__" in entry.parts:
        return None
    if entry.parts[0].endswith(".dist-info"):
        return None if entry.name in _INSTALLER_FILES else str(entry)
    if ".." not in entry.parts:
        return str(entry)
    if path.is_relative_to(scripts):
        return None  # a console script: written again from entry_points.txt
    if path.is_relative_to(data_root):
        return f"{base}.data/data/{path.relative_to(data_root).as_posix()}"
    raise _cannot(f"it installed {path}, outside its environment")


def _checked(path: Path, entry: metadata.PackagePath) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _cannot(f"{path} cannot be read ({exc.strerror or exc})") from None
    recorded = entry.hash  # installers write sha256; another algorithm is not checked here
    listed = f"sha256={recorded.value}" if recorded and recorded.mode == "sha256" else None
    if listed is not None and listed != _record_hash(data):
        raise _cannot(f"{path} differs from its RECORD hash (changed after install)")
    return data


def _add(archive: zipfile.ZipFile, arcname: str, data: bytes) -> None:
    info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _record_text(rows: list[tuple[str, str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(rows)
    return buffer.getvalue()


def _cannot(why: str) -> Refused:
    return Refused(
        f"the tool's own wheel cannot be packed from its installed files: {why}",
        hint="reinstall verl-bootstrap (pip, pipx or `uv tool install`), or run it from a "
        "checkout of its source",
    )
