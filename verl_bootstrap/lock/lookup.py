"""Find a lockfile's artifacts on the user's configured indexes, by name, version and sha256.

uv looks the exact locked versions up (`--no-deps`: nothing is resolved) for the lock's Python
and platform, and reports each artifact's URL and sha256 as the index serves it. A locked sha256
that no index serves is a mismatch: the lockfile was edited, or the index serves other files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed, InputError, Refused
from verl_bootstrap.installer.artifact import Artifact, Served
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.resolve import FIND_LINKS, Target, index_args, load_toml
from verl_bootstrap.lock.format import LockedDist, LockedStage, Lockfile
from verl_bootstrap.machine.host.indexes import DEFAULT, IndexSettings
from verl_bootstrap.machine.host.netfaults import net_fault, without_tool_hints
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.platforms import locked_glibc

__all__ = [
    "NotServed",
    "hashed_dists",
    "lookup",
    "lookup_dists",
    "mismatches",
    "refuse_unserved",
    "served_artifacts",
    "stage_index",
    "verl_sdist_dist",
]


def stage_index(stage: LockedStage) -> str | None:
    """The one named index a stage's distributions come from (besides default and find-links)."""
    names = sorted({d.index for d in stage.distributions if d.index} - {DEFAULT, FIND_LINKS})
    if len(names) > 1:
        raise InputError(f"locked stage {stage.id!r} names several indexes: {', '.join(names)}")
    return names[0] if names else None


def verl_sdist_dist(lock: Lockfile) -> LockedDist | None:
    """verl's release sdist as a distribution to look up (sdist-sourced locks only)."""
    if lock.verl.kind != "sdist" or not lock.verl.sdist_sha256:
        return None
    version = lock.verl.ref.lstrip("v")
    return LockedDist(
        name="verl", version=version, source="sdist", hashes=(lock.verl.sdist_sha256,)
    )


class NotServed(Refused):
    """The indexes could not be asked, or serve no file at all of some locked distributions (none
    under another hash): a run that chose the lockfile by default resolves instead."""


def lookup(lock: Lockfile, settings: IndexSettings, *, offline: bool, work: Path) -> Served:
    """Every hashed distribution of `lock` (and verl's sdist) as the indexes serve it."""
    # The lock's cutoff too: with it, uv sees the indexes as the lock saw them (it leaves out the
    # files an index lists without an upload time, which it otherwise prefers for equal versions).
    glibc = locked_glibc(lock.cuda.virtual_packages)
    target = Target(lock.python, lock.platform, lock.exclude_newer or "", offline, glibc)
    groups: dict[str | None, list[LockedDist]] = {}
    for stage in lock.stages:
        index = stage_index(stage) if stage.kind != "install-verl" else None
        hashed = [d for d in stage.distributions if d.source in ("wheel", "sdist")]
        groups.setdefault(index, []).extend(hashed)
    verl = verl_sdist_dist(lock)
    if verl is not None:  # no stage has verl itself: its editable checkout is not hashed
        groups.setdefault(None, []).append(verl)
    found: dict[str, Sequence[Artifact]] = {}
    for number, (index, dists) in enumerate(sorted(groups.items(), key=lambda g: g[0] or "")):
        if dists:
            group = work / f"group-{number}"
            found.update(lookup_dists(dists, index, target, settings, work=group))
    return found


def lookup_dists(
    dists: Sequence[LockedDist],
    index: str | None,
    target: Target,
    settings: IndexSettings,
    *,
    work: Path,
) -> dict[str, list[Artifact]]:
    """The files each of `dists` (exact versions) has on the indexes of one stage."""
    work.mkdir(parents=True, exist_ok=True)
    pins = work / "pins.txt"
    atomic_write(pins, "".join(f"{d.name}=={d.version}\n" for d in dists))
    out = work / "pylock.served.toml"
    argv = [uv_binary(), "pip", "compile", str(pins), "--no-deps", "--no-header", "--quiet"]
    argv += ["--upgrade", "--format", "pylock.toml", "-o", str(out)]
    argv += ["--python-version", target.python, "--python-platform", target.uv_platform]
    argv += ["--no-sources", *index_args(settings, index)]
    argv += ["--exclude-newer", target.exclude_newer] if target.exclude_newer else []
    argv += ["--offline"] if target.offline else []
    try:
        proc.run(argv, log_path=work / "lookup.log")
    except CommandFailed as exc:
        raise _not_served(exc) from None
    return served_artifacts(load_toml(out.read_text(encoding="utf-8")))


def _not_served(exc: CommandFailed) -> NotServed:
    """Why the lookup failed: the host and the setting that fixes it when the network failed
    (uv's own hints, naming flags verl-bootstrap lacks, are left out), else uv's last line."""
    fault = net_fault(exc.tail)
    if fault is not None:  # said as the route's reason, one line: the fix goes in it
        fix = fault.fix("--index NAME=URL")
        return NotServed(
            f"the locked versions could not be looked up on your indexes: {fault.line()}; "
            f"fix: {fix}",
            hint=fix,
        )
    lines = [line for line in without_tool_hints(exc.tail) if line.strip()]
    return NotServed(
        f"the locked versions could not be looked up on your indexes: "
        f"{lines[-1].strip() if lines else exc.message}",
        hint="check your network and index settings (pip config list), or pass --index",
    )


def served_artifacts(data: Mapping[str, Any]) -> dict[str, list[Artifact]]:
    """The artifacts a pylock.toml lists, by canonical name (those with a sha256)."""
    out: dict[str, list[Artifact]] = {}
    for package in data.get("packages", []):
        files = [(w, "wheel") for w in package.get("wheels", [])]
        if "sdist" in package:
            files.append((package["sdist"], "sdist"))
        out[canonicalize_name(str(package["name"]))] = [
            Artifact(
                url=str(f.get("url") or Path(str(f.get("path"))).absolute().as_uri()),
                sha256=str(f["hashes"]["sha256"]),
                kind=kind,
                size=f.get("size"),
                upload_time=str(f["upload-time"]) if f.get("upload-time") else None,
            )
            for f, kind in files
            if f.get("hashes", {}).get("sha256")
        ]
    return out


def mismatches(dists: Iterable[LockedDist], served: Served) -> list[str]:
    """One line per distribution whose locked sha256s are not all served."""
    problems = []
    for dist in dists:
        offered = {a.sha256 for a in served.get(dist.name, ())}
        missing = [h for h in dist.hashes if h not in offered]
        if missing:
            locked = ", ".join(missing)
            has = ", ".join(sorted(offered)) or "nothing"
            problems.append(
                f"{dist.name} {dist.version}: locked sha256 {locked} is not served "
                f"(the indexes serve {has})"
            )
    return problems


def refuse_unserved(lockfile: Path, dists: Iterable[LockedDist], served: Served) -> None:
    """Refuse a lockfile whose locked sha256s the indexes do not all serve, naming each one
    (for a `--locked` install and for a bundle alike: both check before they write anything)."""
    dists = list(dists)
    problems = mismatches(dists, served)
    absent = [d for d in dists if not served.get(d.name)]
    if problems and len(absent) == len(problems):
        names = ", ".join(f"{d.name} {d.version}" for d in absent)
        raise NotServed(
            f"{lockfile}: your indexes serve no file of {names}",
            hint="add the index it came from (see the lockfile's `index:` names), or pass "
            "--resolve",
        )
    if problems:
        raise Refused(
            f"{lockfile} does not match what your indexes serve ({len(problems)} "
            "distribution(s)); nothing was installed or written:\n  " + "\n  ".join(problems),
            hint="the lockfile was edited, or your index serves other files under these "
            "versions; regenerate it with `verl-bootstrap lock`, or use an index that mirrors "
            "the one it was made from",
        )


def hashed_dists(lock: Lockfile) -> list[LockedDist]:
    """Every distribution of `lock` that is installed hash-checked, and verl's sdist if locked."""
    dists = [d for s in lock.stages for d in s.distributions if d.source in ("wheel", "sdist")]
    verl = verl_sdist_dist(lock)
    return [*dists, verl] if verl is not None else dists
