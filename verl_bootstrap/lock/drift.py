"""Drift: committed lockfiles against their profiles (`lock --check`), envs against a lockfile
(`verify --against`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.installer.envs.inventory import Dist, installed
from verl_bootstrap.lock.format import CondaPackage, LockedDist, Lockfile, profile_hash
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.lockstack import recorded_stack
from verl_bootstrap.paths import env_lockfile
from verl_bootstrap.safety import jsontext

__all__ = [
    "REPLACED",
    "Difference",
    "EnvComparison",
    "Staleness",
    "committed_lockfiles",
    "compare_env",
    "stale_lockfile",
]


REPLACED = "files replaced since install"


@dataclass(frozen=True)
class Staleness:
    """Why a committed lockfile no longer matches its profile (None reason: it is current)."""

    path: Path
    reason: str | None
    regenerate: str = ""


@dataclass(frozen=True)
class Difference:
    """One way an env differs from a lockfile."""

    kind: str  # missing | extra | other-version | other-hash
    name: str
    locked: str | None = None
    found: str | None = None

    def line(self) -> str:
        """A one-line description."""
        if self.kind == "missing":
            return f"missing        {self.name} {self.locked}"
        if self.kind == "extra":
            return f"extra          {self.name} {self.found}"
        return f"{self.kind:<14} {self.name}: locked {self.locked}, env has {self.found}"


def committed_lockfiles(root: Path, profile: str | None = None) -> list[Path]:
    """The lockfiles under `root` (one profile's, when `profile` is given), sorted."""
    pattern = f"{profile}/*.lock.yaml" if profile else "*/*.lock.yaml"
    return sorted(root.glob(pattern))


def stale_lockfile(path: Path) -> Staleness:
    """Whether `path` is stale: unreadable, its profile gone or changed, or its variant gone."""

    try:
        lock = read_lockfile(path)
    except BootstrapError as exc:
        return Staleness(path, exc.message)
    try:
        profile = recorded_stack(lock)
    except BootstrapError as exc:
        return Staleness(path, f"its profile cannot be loaded: {exc.message}", lock.regenerate)
    if lock.cuda.variant not in profile.cuda_variants:
        return Staleness(path, f"variant {lock.cuda.variant} left the profile", lock.regenerate)
    if profile_hash(profile, lock.cuda.variant) != lock.profile_hash:
        return Staleness(path, f"profile {lock.profile!r} changed", lock.regenerate)
    return Staleness(path, None, lock.regenerate)


@dataclass(frozen=True)
class EnvComparison:
    """An env against a lockfile: every difference, whether hashes could be compared, and the
    locked parts a whole kernel wheel holds (part -> that wheel's distribution)."""

    differences: list[Difference]
    hashes_checked: bool
    held: dict[str, str]


def compare_env(prefix: Path, lock: Lockfile, *, own: bool = False) -> EnvComparison:
    """The env at `prefix` against `lock`, its distributions and its own record read once.

    Hashes: an env installed with --locked records which artifacts it got and the digest of each
    installed RECORD; a distribution whose recorded hashes are not the lockfile's, or whose files
    were replaced since, has another hash. An env without that record cannot show hashes. A part
    the record says a whole kernel wheel holds (TransformerEngine's torch extension) is not
    missing while the env has that wheel's distribution, which is compared itself. `own`: `lock`
    is the env's own record (a re-run's check), not read a second time.
    """
    env = installed(prefix)
    locked = lock.distributions()
    record = locked if own else _env_record(prefix)
    held = {n: str(d.replaced_by) for n, d in record.items() if _held_by_whole_wheel(d, env)}
    found = list(_python(prefix, lock))
    for name, dist in sorted(locked.items()):
        if name not in held:
            found.extend(_compare(dist, env.get(name), record.get(name)))
    found.extend(Difference("extra", n, found=d.version) for n, d in env.items() if n not in locked)
    if lock.conda:
        found.extend(_conda_differences(prefix, lock.conda))
    differences = sorted(found, key=lambda d: (d.kind, d.name))
    hashes_checked = any(d.hashes for d in record.values())
    return EnvComparison(differences, hashes_checked, held)


def _held_by_whole_wheel(record: LockedDist, env: Mapping[str, Dist]) -> bool:
    """The env's record says a whole kernel wheel holds this locked part, and the env has that
    wheel's distribution."""
    return record.replaced_by is not None and canonicalize_name(record.replaced_by) in env


def _compare(dist: LockedDist, env: Dist | None, record: LockedDist | None) -> Iterator[Difference]:
    if env is None:
        yield Difference("missing", dist.name, locked=dist.version)
        return
    if not _same_version(dist.version, env.version):
        yield Difference("other-version", dist.name, locked=dist.version, found=env.version)
        return
    if record is None:
        return
    if record.hashes and dist.hashes and not set(record.hashes) & set(dist.hashes):
        yield Difference(
            "other-hash", dist.name, locked=_short(dist.hashes), found=_short(record.hashes)
        )
    elif record.record_sha256 and record.record_sha256 != env.record_sha256:
        # a resolved env's record has no artifact hashes, but the digest of each RECORD
        yield Difference("other-hash", dist.name, locked=_short(dist.hashes), found=REPLACED)


def _short(hashes: tuple[str, ...]) -> str:
    return ", ".join(hashes)


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _env_record(prefix: Path) -> dict[str, LockedDist]:
    """The env's own record (written when it was installed), by distribution name."""

    path = env_lockfile(prefix)
    if not path.is_file():
        return {}
    try:
        return read_lockfile(path).distributions()
    except BootstrapError:
        return {}


def _python(prefix: Path, lock: Lockfile) -> Iterator[Difference]:
    """The env's Python X.Y is the lock's (an env's own lockfile records X.Y.Z: its X.Y)."""
    found = sorted(p.name.removeprefix("python") for p in prefix.glob("lib/python3.*"))
    if found and ".".join(lock.python.split(".")[:2]) not in found:
        yield Difference("other-version", "python", locked=lock.python, found=", ".join(found))


def _conda_differences(prefix: Path, locked: tuple[CondaPackage, ...]) -> Iterator[Difference]:
    records = _conda_meta(prefix)
    for package in locked:
        have = records.get(package.name)
        want = f"{package.version}={package.build}"
        if have is None:
            yield Difference("missing", f"conda:{package.name}", locked=want)
            continue
        got = f"{have.get('version')}={have.get('build')}"
        if got != want:
            yield Difference("other-version", f"conda:{package.name}", locked=want, found=got)
        elif package.sha256 and have.get("sha256") and have["sha256"] != package.sha256:
            yield Difference(
                "other-hash", f"conda:{package.name}", locked=package.sha256, found=have["sha256"]
            )
    names = {p.name for p in locked}
    for name, have in sorted(records.items()):
        if name not in names:
            yield Difference("extra", f"conda:{name}", found=f"{have.get('version')}")


def _conda_meta(prefix: Path) -> dict[str, Mapping[str, str]]:
    out: dict[str, Mapping[str, str]] = {}
    for meta in sorted((prefix / "conda-meta").glob("*.json")):
        data = jsontext.loads(meta.read_text(encoding="utf-8"))
        out[str(data["name"])] = {k: str(v) for k, v in data.items() if isinstance(v, str)}
    return out
