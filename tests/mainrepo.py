"""A local verl repo as a lab tracking verl main sees it: a `main` commit past the release that
carries verl's own uv.lock, with a git dependency in an extra, as verl main's has
(TransferQueue @ git+...).

The uv.lock is real: `uv lock` over verl 0.9.1's real pyproject.toml (its release sdist), kept
to the `cpu` extra a lab's CPU env takes (verl-core, CPU torch from the PyTorch CPU index, as
verl's own `cpu` extra takes it, and pytest), on x86_64 Linux, with verl's override-dependencies
and dependency-metadata. Two of its sources are out of reach where the env is installed, as
verl main's are here:
- verl-core reaches TransferQueue through `verl[transferqueue]`, a git requirement: a local git
  repo of TransferQueue (the default index's 0.1.10 wheel, at the development version
  0.1.10.dev0, as a git branch carries), removed once the lock is made;
- torch 2.13.0+cpu comes from the PyTorch CPU index: at lock time a loopback copy of it holding
  the CPU wheel this machine's find-links hold (Python 3.11, so the lock is made for 3.11), its
  URL then written as the real index's in pyproject.toml and uv.lock, as uv would have written
  them had that index answered.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import quote

import tomllib
from lockfixtures import CUTOFF
from loopback import Server, base_url, serve
from verlrepo import git, make_verl_repo

from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.profile import load_profile

__all__ = ["CLEAN_ENV", "TQ_DEV", "make_main_repo"]

CLEAN_ENV = {  # the default index alone: this machine's own pip settings shape no uv.lock
    **{k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))},
    "PIP_CONFIG_FILE": os.devnull,
}
PY311_X86_64 = (
    "python_full_version >= '3.11' and python_full_version < '3.12' and "
    "platform_machine == 'x86_64' and sys_platform == 'linux'"
)
TQ_DEV = "0.1.10.dev0"  # the version the git source builds as; the index has 0.1.10


def make_main_repo(base: Path) -> Path:
    """verl at v0.9.1, then a `main` commit with the trimmed pyproject and its uv.lock; the
    TransferQueue repo it locks is gone afterwards."""
    transferqueue = _transferqueue_repo(base / "TransferQueue")
    repo = make_verl_repo(base / "verl")
    pyproject = repo / "pyproject.toml"
    server = _cpu_index(base / "pytorch")
    loopback = base_url(server)
    try:
        text = _trimmed(pyproject, transferqueue.as_uri(), loopback + "/whl/cpu")
        pyproject.write_text(text, encoding="utf-8")
        argv = [uv_binary(), "lock", "--exclude-newer", CUTOFF, "--quiet"]
        subprocess.run(argv, cwd=repo, env=CLEAN_ENV, check=True, timeout=900)
    finally:
        server.shutdown()
        server.server_close()
    real = load_profile("cpu").indexes["pytorch-cpu"].url.removesuffix("/whl/cpu")
    for name in ("pyproject.toml", "uv.lock"):
        made = (repo / name).read_text(encoding="utf-8")
        (repo / name).write_text(made.replace(loopback, real), encoding="utf-8")
    git(repo, "add", "pyproject.toml", "uv.lock")
    git(repo, "commit", "-q", "-m", "verl main: uv.lock, TransferQueue from git")
    subprocess.run(["rm", "-rf", str(transferqueue)], check=True)  # out of reach from now on
    return repo


def _cpu_index(root: Path) -> Server:
    """A loopback copy of the PyTorch CPU index holding torch 2.13.0+cpu for Python 3.11 (from
    this machine's find-links, else that index), at the real one's path (whl/cpu/)."""
    wheels = root / "whl" / "cpu"
    wheels.mkdir(parents=True)
    local = [w for d in _find_links() for w in Path(d).glob("torch-2.13.0+cpu-cp311-*.whl")]
    if local:
        shutil.copy(local[0], wheels / local[0].name)
    else:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "torch==2.13.0+cpu"]
        pip += ["--python-version", "3.11", "--only-binary", ":all:", "-d", str(wheels)]
        pip += ["--index-url", load_profile("cpu").indexes["pytorch-cpu"].url]
        subprocess.run(pip, check=True, timeout=900)
    wheel = next(wheels.glob("torch-2.13.0+cpu-cp311-*.whl"))
    page = wheels / "torch" / "index.html"
    page.parent.mkdir()
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page.write_text(f'<a href="../{quote(wheel.name)}#sha256={digest}">{wheel.name}</a>\n')
    return serve(root)


def _find_links() -> list[str]:
    """This machine's find-links folders (where a CPU torch wheel may lie)."""
    value = os.environ.get("PIP_FIND_LINKS", "")
    return [part for part in value.split() if Path(part).is_dir()]


def _transferqueue_repo(dest: Path) -> Path:
    """A git repo of TransferQueue from the index's 0.1.10 wheel, at version 0.1.10.dev0."""
    wheels = dest.parent / "tq-wheel"
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "transferqueue==0.1.10"]
    subprocess.run([*pip, "-d", str(wheels)], env=CLEAN_ENV, check=True, timeout=300)
    wheel = next(wheels.glob("transferqueue-0.1.10-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        meta = archive.read("transferqueue-0.1.10.dist-info/METADATA").decode()
        names = [n for n in archive.namelist() if n.startswith("transfer_queue/")]
        archive.extractall(dest, members=names)
    requires = [
        line.split(":", 1)[1].strip()
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    (dest / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'\n[project]\nname = "TransferQueue"\nversion = "{TQ_DEV}"\n'
        f'requires-python = ">=3.10"\ndependencies = {json.dumps(requires)}\n'
        '\n[tool.setuptools.packages.find]\ninclude = ["transfer_queue*"]\n',
        encoding="utf-8",
    )
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", f"TransferQueue {TQ_DEV}")
    return dest


def _trimmed(pyproject: Path, transferqueue: str, cpu_index: str) -> str:
    """verl's pyproject with its verl-core extra (TransferQueue from git through
    `verl[transferqueue]`, as verl main has it) and a `cpu` extra of verl-core, CPU torch and
    pytest; of [tool.uv], an x86_64 Python 3.11 environment, override-dependencies,
    dependency-metadata, and the CPU index torch comes from."""
    text = pyproject.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    uv = data["tool"]["uv"]
    core = [
        "verl[transferqueue]" if line.lower().startswith("transferqueue") else line
        for line in data["project"]["optional-dependencies"]["verl-core"]
    ]
    head = text[: text.index("[project.optional-dependencies]")]
    middle = text[text.index("[tool.ruff]") : text.index("[tool.uv]")]
    extras = "[project.optional-dependencies]\n"
    extras += f"transferqueue = {json.dumps([f'TransferQueue @ git+{transferqueue}'])}\n"
    extras += f"verl-core = {json.dumps(core)}\n"
    extras += f"cpu = {json.dumps(['verl[verl-core]', 'torch==2.13.0', 'pytest'])}\n\n"
    tool = f"[tool.uv]\nenvironments = [{json.dumps(PY311_X86_64)}]\n"
    tool += f"override-dependencies = {json.dumps(uv['override-dependencies'])}\n"
    tool += "exclude-newer-package = { torch = false }\n"  # that index gives no upload time
    tool += f'\n[[tool.uv.index]]\nname = "pytorch-cpu"\nurl = "{cpu_index}"\nexplicit = true\n'
    for entry in uv["dependency-metadata"]:
        if entry["name"] == "TransferQueue":  # its metadata is read from the git build here
            continue
        tool += "\n[[tool.uv.dependency-metadata]]\n" + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in entry.items()
        )
    tool += '\n[tool.uv.sources]\ntorch = { index = "pytorch-cpu" }\n'
    return head + extras + middle + tool
