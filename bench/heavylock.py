"""A committed GPU lock as a heavy run installs it on a host that cannot reach its kernel wheels.

The heavy tier (tests/test_heavy_locked.py) and `make bench-heavy` (bench/bench_heavy.py) install
the same thing: the committed lock, hash-checked, less each kernel stage whose prebuilt wheel (the
one `plan` chose, e.g. verl's wheelhouse on GitHub) this host cannot reach. Without that wheel the
locked route falls back to a CUDA source build (nvcc, hours on a small host), so the stage is
left out, and named: the wheel, why it is unreachable, and what was left out with it. Nothing is
put in its place. Every other stage is the lock's own; the profile keeps all but the stages left
out, so that the lock's profile hash is the derived profile's and the install stays `--locked`.

Pure but for the reachability probe (one HEAD through the tool's HTTP client): the callers run
the tool themselves (the tests through tests/scaffold.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml
from packaging.utils import canonicalize_name

from verl_bootstrap.httpclient import HttpError, status
from verl_bootstrap.lock.format import LockedStage, Lockfile, profile_hash
from verl_bootstrap.lock.io import write_lockfile
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.models import Profile, Stage
from verl_bootstrap.profile.stacks import apply_stack

PROBE_TIMEOUT = 20.0
_MISSING = re.compile(r"^ModuleNotFoundError: No module named '([A-Za-z0-9_.]+)'$")
# What the locked route does without the stage's prebuilt wheel (kernels/kernelstage.py): a build.
FALLBACK = "the lock's fallback is a CUDA source build (nvcc of torch's CUDA, hours on this host)"


@dataclass(frozen=True)
class LeftOut:
    """A kernel stage's part this host cannot install: its wheel, why, and what goes with it."""

    stage: str
    wheel: str
    why: str
    distributions: tuple[str, ...]  # the lock's, left out with the wheel
    modules: tuple[str, ...]  # the import names they would have brought

    def note(self) -> str:
        """One line for the heavy table."""
        dists = ", ".join(self.distributions)
        return (
            f"its prebuilt wheel {self.wheel} is unreachable here ({self.why}) and {FALLBACK}: "
            f"left out, with the lock's {dists}"
        )


@dataclass(frozen=True)
class Derived:
    """What a heavy run installs: the lock and profile files, and what was left out."""

    lockfile: Path
    profile: Path
    left_out: tuple[LeftOut, ...]
    refused: tuple[str, ...]  # a kernel wheel whose host answered with an error status

    def explains(self, check: str, detail: str) -> str | None:
        """The left-out stage a failed import check is down to: the module it could not find
        is one only that stage brings. Any other error (an undefined symbol among them) is the
        env's own, and None."""
        lines = detail.strip().splitlines()
        found = _MISSING.search(lines[-1]) if check.startswith("import ") and lines else None
        if not found:
            return None
        top = found.group(1).split(".", 1)[0]
        return next((g.stage for g in self.left_out if top in g.modules), None)


def kernel_wheels(plan: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each kernel stage's chosen prebuilt wheel from `plan --json`: id -> (URL, source id)."""
    found = {}
    for step in plan.get("steps", []):
        kernel = step.get("kernel") or {}
        wheel = str(kernel.get("wheel") or "")
        if urlparse(wheel).scheme in ("http", "https"):
            found[step["id"]] = (wheel, str(kernel.get("origin") or kernel.get("source") or ""))
    return found


def unreachable(url: str) -> tuple[str, int | None]:
    """Why `url` cannot be had here ("" when its host answers) and the status it answered."""
    try:
        code = status(url, timeout=PROBE_TIMEOUT)
    except HttpError as exc:
        return f"{urlparse(url).hostname}: {exc.reason}", None
    return "", code


def derive(
    profile: Profile, variant: str, lock: Lockfile, plan: dict[str, Any], folder: Path
) -> Derived:
    """The lock and the profile (its stack applied) less each kernel stage's unreachable part."""
    left, refused = [], []
    for stage_id, (url, origin) in kernel_wheels(plan).items():
        why, code = unreachable(url)
        if why:
            left.append(_left_out(profile, lock, stage_id, url=url, origin=origin, why=why))
        elif code is not None and code >= 400:
            refused.append(f"stage {stage_id}: its prebuilt wheel {url} answers HTTP {code}")
    folder.mkdir(parents=True, exist_ok=True)
    stages = tuple(s for s in (_less(st, left) for st in lock.stages) if s is not None)
    kept = {s.id: s for s in stages}
    profile_file = _write_profile(profile, left, kept, folder / f"{profile.name}-{variant}.yaml")
    derived = apply_stack(load_profile(str(profile_file)), None)
    body = lock.model_copy(
        update={"stages": stages, "profile_hash": profile_hash(derived, variant)}
    )
    lock_file = write_lockfile(body, folder / f"{profile.name}-{variant}.lock.yaml")
    return Derived(lock_file, profile_file, tuple(left), tuple(refused))


def _left_out(
    profile: Profile, lock: Lockfile, stage_id: str, *, url: str, origin: str, why: str
) -> LeftOut:
    """The stage's kernel distribution, the wheel the chosen source gives, what that wheel
    replaces, and the stage's source builds: none of them can be had here."""
    stage = next(s for s in profile.stages if s.id == stage_id)
    kernel = stage.kernel
    names = {kernel.distribution} if kernel else set()
    for source in kernel.sources if kernel else ():
        if source.id == origin and source.distribution:
            names |= {source.distribution, *source.replaces}
    locked = next(s for s in lock.stages if s.id == stage_id)
    names |= {d.name for d in locked.distributions if d.source == "sdist"}
    wanted = {canonicalize_name(n) for n in names}
    dists = tuple(d.name for d in locked.distributions if canonicalize_name(d.name) in wanted)
    modules = {n.replace("-", "_") for n in dists} | set(kernel.modules if kernel else ())
    return LeftOut(stage_id, url, why, dists, tuple(sorted(modules)))


def _less(stage: LockedStage, left: list[LeftOut]) -> LockedStage | None:
    """The locked stage without what was left out of it (None: nothing is left)."""
    gone = {(g.stage, canonicalize_name(d)) for g in left for d in g.distributions}
    kept = tuple(
        d for d in stage.distributions if (stage.id, canonicalize_name(d.name)) not in gone
    )
    if not kept:
        return None
    return stage.model_copy(update={"distributions": kept})


def _write_profile(
    profile: Profile, left: list[LeftOut], kept: dict[str, LockedStage], path: Path
) -> Path:
    """The profile at its ref with the left-out parts gone (data: the same code path installs it).

    A stage left with nothing goes; one left with some of its distributions asks for exactly
    those (the locked ones that stay), without its `kernel:` block (no kernel of it is installed)
    or the expectations of what went.
    """
    gone = {g.stage: {canonicalize_name(d) for d in g.distributions} for g in left}
    stages = []
    for stage in profile.stages:
        body = _stage_less(stage, gone.get(stage.id, set()), kept.get(stage.id))
        if body is not None:
            stages.append(body)
    dropped = {s.id for s in profile.stages} - {s["id"] for s in stages}
    for body in stages:
        if "needs" in body:
            body["needs"] = [n for n in body["needs"] if n not in dropped]
    out: dict[str, Any] = {
        "schema_version": 1,
        "name": profile.name,
        "extends": profile.name,
        "description": f"{profile.description} (less what this host cannot reach)",
        "verl": profile.verl.model_dump(mode="json"),
        "python": profile.python.model_dump(mode="json"),
        "cuda_variants": {k: v.model_dump(mode="json") for k, v in profile.cuda_variants.items()},
        "stages": stages,
        "verify": profile.verify.model_dump(mode="json"),
        "substitutions": [
            s.model_dump(mode="json", exclude_defaults=True) for s in profile.substitutions
        ],
        "stacks": [],
    }
    path.write_text(yaml.safe_dump(out, sort_keys=False), encoding="utf-8")
    return path


def _stage_less(stage: Stage, gone: set[str], locked: LockedStage | None) -> dict[str, Any] | None:
    body = stage.model_dump(mode="json", exclude_defaults=True)
    if not gone:
        return body
    if locked is None:
        return None
    body.pop("kernel", None)
    body["packages"] = [f"{d.name}=={d.version}" for d in locked.distributions]
    body["expect"] = {k: v for k, v in stage.expect.items() if canonicalize_name(k) not in gone}
    for variant in body.get("variants", {}).values():
        variant.pop("packages", None)
        variant.pop("expect", None)
    return body
