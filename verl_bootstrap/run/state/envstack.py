"""The stack an env was installed with where it came from verl's own uv.lock (locking.refstack):
made again from the env's own checkout, with the versions the env's lockfile records standing in
for what the install could not reach (nothing is asked of the network). Where that lockfile
records its `uv_lock:` (every env installed since it is written), the sources it substituted are
the ones not reached and the others were; an older record says neither, so nothing counts as
reached."""

from __future__ import annotations

from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import BootstrapError
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.refstack import replayed
from verl_bootstrap.lock.making.uvstack import Reach, uv_lock_stack
from verl_bootstrap.paths import checkout_dir, env_lockfile
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack
from verl_bootstrap.source.reffiles import PYPROJECT, UV_LOCK

__all__ = ["env_uv_lock_stack"]


def env_uv_lock_stack(
    base: Profile, ref: str, prefix: Path, options: frozenset[str]
) -> Profile | None:
    """`base` at `ref` as the env's checkout's uv.lock gives it (None: it has none, or the
    env's record does not say enough)."""
    checkout, lock = checkout_dir(prefix), env_lockfile(prefix)
    texts = [checkout / UV_LOCK, checkout / PYPROJECT]
    if not all(p.is_file() for p in texts) or not lock.is_file():
        return None
    try:
        recorded = read_lockfile(lock)
        reach = _reach(recorded, base)
        done = proc.capture(["git", "rev-parse", "HEAD"], cwd=checkout, timeout=60)
        own = apply_stack(base, ref, allow_unsupported=True, options=options)
        files = (texts[0].read_text(encoding="utf-8"), texts[1].read_text(encoding="utf-8"))
        found = uv_lock_stack(
            own,
            ref,
            (*files, done.stdout.strip()),
            variant=recorded.cuda.variant,
            platform=host_platform(),
            python=".".join(recorded.python.split(".")[:2]),
            reach=reach,
        )
    except BootstrapError:
        return None
    return getattr(found, "profile", None)


def _reach(recorded: Lockfile, base: Profile) -> Reach:
    """What the install reached, as the env's lockfile says it (see the module docstring)."""
    versions = {n: d.version for n, d in recorded.distributions().items()}
    if recorded.uv_lock is None:
        return Reach(indexes={}, git=lambda _url: False, nearest=versions.get)
    indexes = {name: spec.url for name, spec in base.indexes.items()}
    return replayed(recorded.uv_lock, versions, indexes=indexes)
