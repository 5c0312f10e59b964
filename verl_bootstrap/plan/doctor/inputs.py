"""What doctor is asked to check, and the facts it gathers once for every check to share."""

from __future__ import annotations

import json
import os
import platform as _platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.machine.gpu.driverinfo import DriverInfo
from verl_bootstrap.paths import PROBES
from verl_bootstrap.platforms import host_platform
from verl_bootstrap.profile.models import Profile

__all__ = ["PROBE_LIBS", "Context", "DoctorInputs", "EnvFacts", "exact_env", "run_probe"]

PROBE_LIBS = PROBES / "libs.py"


@dataclass(frozen=True)
class DoctorInputs:
    """Everything doctor needs, built once by the CLI (or the install's preflight)."""

    profile: Profile | None = None
    variant: str | None = None  # already chosen (choose_variant); None when there is no plan
    prefix: Path | None = None  # the env to check, or the one an install will create
    # An env's interpreter given instead of a prefix; beside a prefix whose env does not exist
    # yet, the interpreter a new venv will be made from.
    python: Path | None = None
    root: Path = Path("/")  # where /proc and /etc are read from (tests point it elsewhere)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    urls: tuple[tuple[str, str], ...] = ()  # (label, url) the plan uses; labels like "index:pypi"
    optional_urls: frozenset[str] = frozenset()  # labels whose failure only warns
    skip: frozenset[str] = frozenset()  # --skip-check names
    # an install's stages already done with these inputs (what they would install is moot)
    settled: frozenset[str] = frozenset()
    lock_commit: str | None = None  # the verl commit the lockfile names
    expected_versions: Mapping[str, str] = field(default_factory=dict)  # protected name -> version
    network_timeout: float = 3.0
    backend: str | None = None  # the plan's env backend; None: the profile's
    # ("uv" | "pip" | "rattler", folder) to use instead of the caches environ names
    cache_dirs: tuple[tuple[str, Path], ...] = ()
    wheel_tags: tuple[str, ...] = ()  # platform tags of the planned wheels (glibc, machine)
    lock_platform: str | None = None  # the platform of the lockfile the plan installs
    # stage id -> why it compiles, as the plan chose each kernel's source (None: no plan was
    # made, and every stage that may compile counts); and stage id -> the source of the
    # prebuilt wheel a kernel stage takes instead
    source_builds: tuple[tuple[str, str], ...] | None = None
    prebuilt_kernels: tuple[tuple[str, str], ...] = ()
    build_jobs: tuple[tuple[str, int], ...] = ()  # stage id -> the MAX_JOBS the plan sized it to
    # This host's facts, given instead of read (a report recorded on another node, tests):
    machine: str | None = None  # `uname -m`; None: this host's
    glibc: str | None = None  # "2.39"; None: this host's
    detect: bool = True  # False: judge `driver` as given (the plan's), without reading the host
    driver: DriverInfo | None = None
    use_nvml: bool = True
    nvidia_smi: str | None = "nvidia-smi"
    probe_timeout: float = 300.0  # importing torch and TransformerEngine can take a while


@dataclass(frozen=True)
class EnvFacts:
    """An existing env: its prefix, its interpreter, and what the library probe saw in it."""

    prefix: Path
    python: Path
    exists: bool
    probe: Mapping[str, Any] | None = None
    probe_error: str | None = None


@dataclass(frozen=True)
class Context:
    """The inputs plus the facts gathered once: the driver and the env."""

    inputs: DoctorInputs
    driver: DriverInfo | None
    env: EnvFacts | None

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the user's processes will run with."""
        return self.inputs.environ

    @property
    def machine(self) -> str:
        """The host's machine (`uname -m`): given, else this host's."""
        return self.inputs.machine or _platform.machine()

    @property
    def platform(self) -> str:
        """The host's platform in lockfile terms ('linux-64', 'linux-aarch64')."""
        return host_platform(self.machine)

    @property
    def profile(self) -> Profile | None:
        """The profile being checked against, if any."""
        return self.inputs.profile


def exact_env(environ: Mapping[str, str]) -> dict[str, str | None]:
    """proc overrides that make a child's environment exactly `environ`."""
    overrides: dict[str, str | None] = {k: None for k in os.environ if k not in environ}
    overrides.update(environ)
    return overrides


def _last_json(stdout: str) -> Mapping[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_probe(env: EnvFacts, environ: Mapping[str, str], timeout: float) -> EnvFacts:
    """Run the library probe in the env's interpreter, with the user's environment."""
    args = [str(env.python), str(PROBE_LIBS)]
    try:
        done = proc.capture(args, env=exact_env(environ), timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return replace(env, probe_error=f"the probe did not finish: {exc}")
    answer = _last_json(done.stdout)
    if answer is None:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return replace(env, probe_error=f"the probe exited {done.returncode}: {tail}")
    return replace(env, probe=answer)
