"""Container definitions from a lockfile: an Apptainer definition or a Dockerfile that installs
exactly the locked set and runs `verify` while the image is built.

Both run the same install commands, one `root` variable deep (default /opt, so the image holds
/opt/verl and the tool in /opt/verl-bootstrap), which lets the commands be run elsewhere to test
them. Two sources:
  - a bundle copied into the build (`--bundle`): no network during the build at all;
  - the index: the lockfile and the tool's wheel are copied in, the artifacts come from the
    index, hash-checked, as any `--locked` install.
The base image is `python:X.Y-bookworm` for every variant: the PyTorch wheels of the locks carry
their CUDA runtime (the nvidia-* wheels), so no CUDA image is needed; the image has git and a C
compiler for the locked sdists. A lock that builds CUDA code from source needs nvcc: pass --base.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from verl_bootstrap import __version__
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.safety.shellquote import one_line

__all__ = [
    "IMAGE_ENV",
    "LOCKFILE_NAME",
    "ContainerSource",
    "base_image",
    "cuda_source_builds",
    "install_lines",
]

IMAGE_ENV = "/opt/verl"  # the env inside the image
LOCKFILE_NAME = "verl-bootstrap.lock.yaml"  # the lockfile's name in the build context


@dataclass(frozen=True)
class ContainerSource:
    """Where the build gets the locked set: a bundle (offline) or the index (tool wheel + lock)."""

    bundle: str | None = None  # the bundle's path relative to the definition's folder
    wheel: str | None = None  # the tool's wheel's name in the definition's folder


def base_image(lock: Lockfile) -> str:
    """A plain OS with the lock's Python: the locked torch wheels bring their CUDA runtime."""
    return f"python:{lock.python}-bookworm"


def cuda_source_builds(lock: Lockfile) -> list[str]:
    """Locked sdists built without isolation (CUDA extensions): they need nvcc in the image."""
    return [
        d.name
        for s in lock.stages
        if "--no-build-isolation" in s.options
        for d in s.distributions
        if d.source == "sdist"
    ]


def install_lines(lock: Lockfile, source: ContainerSource) -> list[str]:
    """The build's commands (POSIX sh), run in order; `root` may be moved with VERL_IMAGE_ROOT."""
    # every value from the lockfile is one quoted word (the lockfile's schema shapes them too)
    flags = f'--profile {_q(lock.profile)} --cuda {_q(lock.cuda.variant)} --prefix "$root/verl"'
    tool = '"$root/verl-bootstrap/tool/bin/verl-bootstrap"'
    lines = [
        "set -eu",
        'root="${VERL_IMAGE_ROOT:-/opt}"',
        "command -v git >/dev/null || { apt-get update && apt-get install -y "
        "--no-install-recommends git && rm -rf /var/lib/apt/lists/*; }",
        'mkdir -p "$root/verl-bootstrap"',
        'cd "$root/verl-bootstrap"',
    ]
    if source.bundle is not None:
        lines += [
            "tar -xf bundle.tar install.sh",
            f'VERL_BOOTSTRAP_HOME="$root/verl-bootstrap" sh install.sh bundle.tar {flags}',
            f'ln -sfn "tool-{__version__}" "$root/verl-bootstrap/tool"',
            "rm -f bundle.tar install.sh",
        ]
    else:
        lines += [
            f"{_q(f'python{lock.python}')} -m venv tool",
            f"tool/bin/python -m pip install --quiet {_q(str(source.wheel))}",
            f"{tool} --locked --lockfile {LOCKFILE_NAME} {flags}",
        ]
    # the install's last step is `verify` (imports, versions, `uv pip check`): a failure fails
    # the build; the tool stays in the image for `verify` later
    return [one_line(line, "a line of the container's install commands") for line in lines]


def _q(value: str) -> str:
    """`value` as one word of POSIX sh: a line break or control character is refused."""
    return shlex.quote(one_line(value, "a value from the lockfile"))
