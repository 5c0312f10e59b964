"""The two container definition formats, rendered from the same install commands, and the
writer of a definition and its build context."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.export.container import (
    IMAGE_ENV,
    LOCKFILE_NAME,
    ContainerSource,
    base_image,
    cuda_source_builds,
    install_lines,
)
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.paths import atomic_copy, atomic_write
from verl_bootstrap.redact import redact
from verl_bootstrap.safety.shellquote import one_line

__all__ = [
    "APPTAINER_SECTIONS",
    "render_apptainer",
    "render_dockerfile",
    "write_container",
]

# The order the definition's sections are written in (Apptainer reads them in any order)
APPTAINER_SECTIONS = ("labels", "files", "post", "environment", "runscript", "test", "help")
ENV_VARS = (
    ("VIRTUAL_ENV", IMAGE_ENV),
    ("PATH", f"{IMAGE_ENV}/bin:$PATH"),
    ("PYTHONNOUSERSITE", "1"),
    ("VERL_BOOTSTRAP_PREFIX", IMAGE_ENV),
)


def _labels(lock: Lockfile) -> list[tuple[str, str]]:
    return [(key, one_line(value, f"the label {key}")) for key, value in _label_values(lock)]


def _label_values(lock: Lockfile) -> list[tuple[str, str]]:
    return [
        ("org.verl-bootstrap.profile", lock.profile),
        ("org.verl-bootstrap.variant", lock.cuda.variant),
        ("org.verl-bootstrap.platform", lock.platform),
        ("org.verl-bootstrap.torch", lock.cuda.torch or "none"),
    ]


def _header(lock: Lockfile, source: ContainerSource, base: str) -> list[str]:
    how = "from the bundle (no network)" if source.bundle else "from the index, hash-checked"
    lines = [
        f"# verl env of profile {lock.profile}, variant {lock.cuda.variant}, {lock.platform};",
        f"# installs exactly its lockfile {how}, then runs verify.",
        f"# Base {base}: the locked torch wheels bring their CUDA runtime.",
        f"# Regenerate the lock with: {redact(lock.regenerate)}",
    ]
    builds = cuda_source_builds(lock)
    if builds:
        lines.append(
            f"# {', '.join(builds)} build(s) from source: pass --base with nvcc and Python "
            f"{lock.python}."
        )
    # a comment line holds its value: a line break in it would start an instruction
    return [one_line(line, "a line of the definition's header") for line in lines]


def _copied(source: ContainerSource) -> list[tuple[str, str]]:
    named = source.bundle if source.bundle is not None else str(source.wheel)
    one_line(named, "the file copied into the image")  # a line break would add an instruction
    if source.bundle is not None:
        return [(source.bundle, "/opt/verl-bootstrap/bundle.tar")]
    return [
        (LOCKFILE_NAME, f"/opt/verl-bootstrap/{LOCKFILE_NAME}"),
        (str(source.wheel), f"/opt/verl-bootstrap/{source.wheel}"),
    ]


def render_apptainer(lock: Lockfile, source: ContainerSource, base: str) -> str:
    """An Apptainer/Singularity definition; build it without root with `--fakeroot`."""
    post = "\n".join(f"    {line}" for line in install_lines(lock, source))
    body = {
        "labels": "\n".join(f"    {k} {v}" for k, v in _labels(lock)),
        "files": "\n".join(f"    {a} {b}" for a, b in _copied(source)),
        "post": post,
        "environment": f"    . {IMAGE_ENV}/.verl-bootstrap/activate",
        "runscript": f'    exec {IMAGE_ENV}/bin/python "$@"',
        "test": f"    {IMAGE_ENV}/bin/python -c 'import verl, torch'",
        "help": f"    verl ({lock.profile}, {lock.cuda.variant}): apptainer exec IMAGE.sif "
        "python -m verl.trainer.main_ppo ...",
    }
    # the header comes first; a local .sif base (an air-gapped node) needs no registry
    agent = "localimage" if base.endswith(".sif") else "docker"
    text = f"Bootstrap: {agent}\nFrom: {base}\n"
    text += "\n".join(_header(lock, source, base)) + "\n"
    for name in APPTAINER_SECTIONS:
        text += f"\n%{name}\n{body[name]}\n"
    return text


def render_dockerfile(lock: Lockfile, source: ContainerSource, base: str) -> str:
    """A Dockerfile (also for podman/buildah); the same commands in one RUN."""
    lines = ["# syntax=docker/dockerfile:1", *_header(lock, source, base), f"FROM {base}"]
    labels = " ".join(f"{k}={json.dumps(v)}" for k, v in _labels(lock))  # Dockerfile's quoting
    lines.append(f"LABEL {labels}")
    lines += [f"COPY {a} {b}" for a, b in _copied(source)]
    run = " && \\\n    ".join(install_lines(lock, source)[1:])
    # cd: the commands take their root from one variable, so they can be run outside a build;
    # git's apt version is the base image's own (pinning it would break on the next base)
    lines.append("# hadolint ignore=DL3003,DL3008")
    lines.append(f"RUN set -eu; \\\n    {run}")
    env = " \\\n    ".join(f'{k}="{v}"' for k, v in ENV_VARS)
    lines.append(f"ENV {env}")
    lines.append(f'CMD ["{IMAGE_ENV}/bin/python"]')
    return "\n".join(lines) + "\n"


def write_container(
    lock: Lockfile, lockfile: Path, fmt: str, output: Path, *, bundle: Path | None, base: str | None
) -> list[Path]:
    """Write the definition (and, from the index, the lockfile and the tool's wheel beside it)."""
    folder = output.parent.absolute()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    if bundle is not None:
        source = ContainerSource(bundle=_inside(bundle, folder))
    else:
        from verl_bootstrap.lock.bundle.bundlesources import build_tool_wheel  # noqa: PLC0415 - uv build: index-sourced definitions only

        # renamed into place (a link at either name is replaced, not written through), and the
        # wheel is built in a folder of the tool's own: the output folder is the user's
        atomic_copy(lockfile, folder / LOCKFILE_NAME)
        with tempfile.TemporaryDirectory(prefix="verl-bootstrap-wheel-") as tmp:
            built = build_tool_wheel(Path(tmp))
            wheel = folder / built.name
            atomic_copy(built, wheel)
        source = ContainerSource(wheel=wheel.name)
        written += [folder / LOCKFILE_NAME, wheel]
    render = render_apptainer if fmt == "apptainer" else render_dockerfile
    atomic_write(output, render(lock, source, base or base_image(lock)))
    output.chmod(0o644)
    return [output, *written]


def _inside(bundle: Path, folder: Path) -> str:
    """The bundle's path from the definition's folder; a build copies only what is inside it."""
    relative = os.path.relpath(bundle.absolute(), folder)
    if relative.startswith(".."):
        raise InputError(
            f"{bundle} is outside {folder}, the folder the definition is written to",
            hint="move the bundle beside the definition (a build copies files from there)",
        )
    return relative
