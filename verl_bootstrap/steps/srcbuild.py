"""Source builds in a locked install: each locked sdist is built into a wheel before its stage.

The wheel is kept in the env's state folder and installed in the sdist's place, hash-checked by
its own sha256, so the env's record can name the built wheel (`built_sha256`): nodes that built
the same locked sdist can be compared, and the wheel can be copied to a node that cannot build.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from verl_bootstrap.commands import InstallRequest, build_command
from verl_bootstrap.errors import StepFailed
from verl_bootstrap.host.indexes import IndexSettings
from verl_bootstrap.lockfile.fetch import cached_archive, fetch_checked
from verl_bootstrap.lockfile.lookup import Artifact
from verl_bootstrap.lockfile.model import LockedStage
from verl_bootstrap.paths import built_wheels_dir, file_sha256
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
) -> dict[str, Artifact]:
    """Build each sdist `stage` locks into a wheel; name -> the built wheel (file URL, sha256).

    Each sdist is the checked file (`artifacts`, from the precheck), kept in the tool's cache by
    its sha256. `run` runs a command the way the stage runs its install (log, env, Ctrl-C).
    """
    sdists = [
        d
        for d in stage.distributions
        if d.source == "sdist" and d.name in artifacts and artifacts[d.name].kind == "sdist"
    ]
    out = built_wheels_dir(prefix, stage.id)
    shutil.rmtree(out, ignore_errors=True)  # the tool's own folder: wheels of an unfinished try
    built = {}
    for dist in sdists:
        sdist = artifacts[dist.name]
        archive = cached_archive(cache, sdist.sha256, sdist.filename)
        fetch_checked(sdist, archive, sdist.sha256)
        into = inside(out, dist.name, what="package name")
        run(build_command(request, settings, archive, into))
        wheel = _the_wheel(into, dist.name)
        digest = file_sha256(wheel)
        built[dist.name] = Artifact(url=wheel.as_uri(), sha256=digest, kind="wheel")
    return built


def _the_wheel(folder: Path, name: str) -> Path:
    wheels = sorted(folder.glob("*.whl"))
    if len(wheels) != 1:
        raise StepFailed(
            f"building {name} from its locked sdist left {len(wheels)} wheels in {folder}",
            hint="read the step's log for the build's own messages",
        )
    return wheels[0]
