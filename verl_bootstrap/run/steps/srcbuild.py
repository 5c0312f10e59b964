"""Source builds in a locked install: each locked sdist is built into a wheel before its stage.

The wheel is kept in the env's state folder and installed in the sdist's place, hash-checked by
its own sha256, so the env's record can name the built wheel (`built_sha256`): nodes that built
the same locked sdist can be compared, and the wheel can be copied to a node that cannot build.
A pure-Python wheel is kept per user (builtwheels.py): the next env that locks the same sdist
takes it instead of building it again.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.cmdline import InstallRequest, build_command
from verl_bootstrap.installer.download import cached_archive, fetch_checked
from verl_bootstrap.installer.envs.venv import python_version
from verl_bootstrap.lock.format import LockedStage
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.paths import built_wheels_dir, file_sha256
from verl_bootstrap.run.steps import builtwheels
from verl_bootstrap.safety.shapes import inside

__all__ = ["build_locked_sdists"]


def build_locked_sdists(
    stage: LockedStage,
    artifacts: Mapping[str, Artifact],
    *,
    prefix: Path,
    request: InstallRequest,
    settings: IndexSettings,
    cache: Path,
    run: Callable[[list[str]], None],
    log: Callable[[str], None] = lambda line: None,
) -> dict[str, Artifact]:
    """Build each sdist `stage` locks into a wheel; name -> the built wheel (file URL, sha256).

    Each sdist is the checked file (`artifacts`, from the precheck), kept in the tool's cache by
    its sha256. `run` runs a command the way the stage runs its install (log, env, Ctrl-C);
    `log` writes a line to the step's log.
    """
    sdists = [
        d
        for d in stage.distributions
        if d.source == "sdist" and d.name in artifacts and artifacts[d.name].kind == "sdist"
    ]
    out = built_wheels_dir(prefix, stage.id)
    shutil.rmtree(out, ignore_errors=True)  # the tool's own folder: wheels of an unfinished try
    built = {}
    keys = _Keys(request)
    for dist in sdists:
        sdist = artifacts[dist.name]
        archive = cached_archive(cache, sdist.sha256, sdist.filename)
        fetch_checked(sdist, archive, sdist.sha256)
        into = inside(out, dist.name, what="package name")
        key = keys.key(sdist.sha256)
        kept = builtwheels.kept_wheel(cache, key) if key else None
        if kept is not None:
            into.mkdir(parents=True)
            shutil.copyfile(kept, into / kept.name)
            log(f"{dist.name}: the wheel an earlier env built from this locked sdist ({kept})")
        else:
            run(build_command(request, settings, archive, into))
        wheel = _the_wheel(into, dist.name)
        if key and kept is None:
            builtwheels.keep(cache, key, wheel)
        digest = file_sha256(wheel)
        built[dist.name] = Artifact(url=wheel.as_uri(), sha256=digest, kind="wheel")
    return built


class _Keys:
    """Build keys for one stage's sdists: none for a build without isolation (its result depends
    on what the env holds), a build env the lockfile does not pin (an older lockfile's), or an
    interpreter that does not answer."""

    def __init__(self, request: InstallRequest) -> None:
        self._request = request
        self._python: str | None = None
        self._constraints: bytes | None = None

    def key(self, sdist_sha256: str) -> str | None:
        if self._request.no_build_isolation:
            return None
        if self._python is None:
            self._python = python_version(self._request.python) or ""
            path = self._request.build_constraints
            self._constraints = path.read_bytes() if path and path.is_file() else None
        if not self._python or self._constraints is None:
            return None
        return builtwheels.build_key(sdist_sha256, self._constraints, self._python)


def _the_wheel(folder: Path, name: str) -> Path:
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise StepFailed(
            f"building {name} from its locked sdist left {len(wheels)} wheels in {folder}",
            hint="read the step's log for the build's own messages",
        )
    return wheels[0]
