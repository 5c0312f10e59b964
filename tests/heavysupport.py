"""Helpers of the heavy tier: real resolutions and real installs of the shipped GPU profiles.

Everything here runs the real tools (uv, the verl-bootstrap CLI) against the configured package
indexes; nothing is faked. What this machine cannot do (a source build of CUDA code, a file only
GitHub serves, anything that needs the NVIDIA driver) is detected and named, never passed.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from packaging.utils import parse_sdist_filename, parse_wheel_filename

from verl_bootstrap.installer import resolve
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.machine.host.indexes import read_pip_settings
from verl_bootstrap.profile.models import Profile, Stage
from verl_bootstrap.profile.stagespec import StageSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ROOT / "build" / "heavy"
RESULTS = HEAVY / "results.json"
# The platforms a resolution is tried for, oldest glibc first (PEP 600 tags, uv's spelling).
PLATFORMS = ("x86_64-manylinux_2_28", "x86_64-manylinux_2_34")
_NO_WHEEL = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) has no usable wheels")
_WRONG_PLATFORM = "has no wheels with a matching platform tag"


def index_args() -> list[str]:
    """uv flags for the indexes, find-links and constraints this user's pip is set up with (as a
    stage's install passes them), and no [tool.uv] sources."""
    return [*resolve.index_args(read_pip_settings(), None), "--no-sources"]


def requirement_name(spec: str) -> str:
    """The distribution name of a requirement string, normalised."""
    return re.split(r"[\s\[<>=!~;@]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


@dataclass(frozen=True)
class Compiled:
    """One `uv pip compile`: its pins, or why it found no solution."""

    ok: bool
    pins: tuple[str, ...] = ()
    error: str = ""

    def version(self, name: str) -> str | None:
        """The pinned version of `name`, if any."""
        for pin in self.pins:
            if requirement_name(pin) == name:
                return pin.split("==", 1)[1]
        return None


def compile_requirements(
    requirements: Iterable[str],
    *,
    python: str,
    workdir: Path,
    constraints: Iterable[str] = (),
    overrides: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
    only_binary: bool = False,
    no_deps: bool = False,
) -> Compiled:
    """Resolve `requirements` for Python `python` (nothing is installed or built)."""
    workdir.mkdir(parents=True, exist_ok=True)
    req, con, ovr, out = (workdir / n for n in ("in.txt", "c.txt", "o.txt", "out.txt"))
    req.write_text("\n".join(requirements) + "\n")
    con.write_text("\n".join(constraints) + "\n")
    ovr.write_text("\n".join(overrides) + "\n")
    out.unlink(missing_ok=True)  # uv takes an existing output file's pins as preferences
    cmd = [uv_binary(), "pip", "compile", "-q", *index_args(), "--python-version", python]
    cmd += ["-c", str(con), "--override", str(ovr), str(req), "-o", str(out)]
    if platform:
        cmd += ["--python-platform", platform]
    if only_binary:
        cmd += ["--only-binary", ":all:"]
    if no_deps:
        cmd.append("--no-deps")
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    if done.returncode != 0:
        return Compiled(ok=False, error=done.stderr.strip())
    pins = [line.split()[0] for line in out.read_text().splitlines() if "==" in line[:200]]
    return Compiled(ok=True, pins=tuple(p for p in pins if not p.startswith(("#", "-"))))


def stage_requirements(stage: StageSpec | Stage, release: str | None) -> list[str]:
    """What a stage asks the installer for (verl itself by its release, for verl-deps)."""
    reqs = list(stage.packages)
    if stage.kind == "verl-deps" and release:
        extras = f"[{','.join(stage.extras)}]" if stage.extras else ""
        reqs.append(f"verl{extras}=={release}")
    return reqs


def source_builds(stage: StageSpec, *, python: str, workdir: Path) -> dict[str, str]:
    """Distributions this stage can only get by building them from source here (name -> why).

    Only stages that build CUDA code against the installed torch (`no_build_isolation`) are
    asked: an sdist elsewhere (flashinfer-python 0.3.1, a JIT package) builds in seconds, as it
    does for a user, and is installed for real.
    """
    if stage.kind != "packages" or not stage.packages or not stage.no_build_isolation:
        return {}
    done = compile_requirements(
        stage.packages, python=python, workdir=workdir, only_binary=True, env=stage.env
    )
    if done.ok:
        return {}
    found = sdists_blamed(done.error)
    return {
        name: f"source build: the index serves {name} {version} only as an sdist (CUDA code, "
        "built with nvcc against the installed torch)"
        for name, version in found.items()
    }


def sdists_blamed(error: str) -> dict[str, str]:
    """The distributions a `--only-binary :all:` resolution failed on (name -> version)."""
    return {m.group(1).lower(): m.group(2) for m in _NO_WHEEL.finditer(error)}


def host_python(profile: Profile) -> tuple[Path, str]:
    """The interpreter the venv backend picks here for `profile`, and its X.Y."""
    from verl_bootstrap.machine.host.interpreters import find_interpreter  # noqa: PLC0415

    path = find_interpreter(profile.python.requires, profile.python.prefer)
    done = subprocess.run(
        [str(path), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return path, done.stdout.strip()


def tree_bytes(root: Path) -> int:
    """Bytes under `root` (each inode once, links not followed), like `du -sb`."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            st = (Path(folder) / name).lstat()
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def download_bytes(
    python: Path, version: str, workdir: Path, env: Mapping[str, str] | None = None
) -> int | None:
    """What the env's distributions weigh as downloads (file sizes the indexes report): of the
    very file each was installed from where the env says (a locked install names each by its
    URL), else of the first wheel the index lists for its version."""
    frozen = subprocess.run(
        [uv_binary(), "pip", "freeze", "--python", str(python), "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    pins, urls = installed_files(frozen)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "frozen.txt").write_text("\n".join(pins) + "\n")
    lock = workdir / "pylock.toml"
    cmd = [uv_binary(), "pip", "compile", "-q", *index_args(), "--no-deps"]
    cmd += ["--python-version", version, "--format", "pylock.toml"]
    cmd += [str(workdir / "frozen.txt"), "-o", str(lock)]
    child = {**os.environ, **(env or {})}
    if subprocess.run(cmd, capture_output=True, check=False, env=child).returncode != 0:
        return None
    total = 0
    for package in tomllib.loads(lock.read_text())["packages"]:
        files = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        taken = [f for f in files if f.get("url") in urls]
        total += sum(_artifact_size(a) for a in (taken or files)[:1])
    return total


def installed_files(frozen: Iterable[str]) -> tuple[list[str], set[str]]:
    """`uv pip freeze` lines as pins (name==version), and the URLs of those installed from one
    (`name @ URL`, the version read from the file's name)."""
    pins, urls = [], set()
    for line in (ln.strip() for ln in frozen):
        if "==" in line:
            pins.append(line)
        elif " @ " in line:
            name, url = (part.strip() for part in line.split(" @ ", 1))
            filename = url.rsplit("/", 1)[-1]
            if filename.endswith(".whl"):
                version = parse_wheel_filename(filename)[1]
            else:
                version = parse_sdist_filename(filename)[1]
            pins.append(f"{name}=={version}")
            urls.add(url)
    return pins, urls


def _artifact_size(artifact: Mapping[str, Any]) -> int:
    if "size" in artifact:
        return int(artifact["size"])
    url = str(artifact.get("url", ""))
    if url.startswith("file://"):
        return Path(url.removeprefix("file://")).stat().st_size
    return 0


@dataclass
class HeavyResult:
    """One row of the heavy table."""

    profile: str
    variant: str
    ref: str = ""
    result: str = "FAILED"
    python: str = ""
    seconds: float | None = None
    download_bytes: int | None = None
    env_bytes: int | None = None
    not_provable: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    lockfile: str = ""  # a locked row: the committed lockfile it installed
    route: str = ""  # the route line the run printed
    checks: dict[str, str] = field(default_factory=dict)  # verify's checks: name -> status
    steps: dict[str, float] = field(default_factory=dict)  # the run's steps: id -> seconds

    def to_json(self) -> dict[str, Any]:
        """The JSON form, for the results file."""
        return dict(self.__dict__)


def save_results(rows: list[HeavyResult]) -> None:
    """This run's rows into build/heavy/results.json (over the last run's), and the table."""
    body = {
        "date": date.today().isoformat(),
        "host": f"{platform.system()} {platform.machine()}, glibc {platform.libc_ver()[1]}",
        "rows": _merged(rows),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    from bench.heavy_table import render  # noqa: PLC0415 - the renderer lives with the benches

    print("\n\n" + render(body) + "\n")


def _row_key(row: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (row["profile"], row["variant"], row.get("ref", ""), row.get("lockfile", ""))


def _merged(rows: list[HeavyResult]) -> list[dict[str, Any]]:
    """This run's rows over the last results file's: a run of some cases (`-k`) updates those.

    Each row carries its own date, so a table mixing runs says which row is from when.
    """
    today = date.today().isoformat()
    fresh = [{**r.to_json(), "date": today} for r in rows]
    if not RESULTS.is_file():
        return fresh
    old = json.loads(RESULTS.read_text(encoding="utf-8"))
    ran = {_row_key(r) for r in fresh}
    kept = [{"date": old["date"], **r} for r in old["rows"] if _row_key(r) not in ran]
    order = {_row_key(r): n for n, r in enumerate(old["rows"])}
    return sorted([*kept, *fresh], key=lambda r: order.get(_row_key(r), len(order)))
