"""Offline bundles for the tests: the cpu lock bundled once per session, a way to cut the network
off, and small hand-made bundles for refusals that must happen before anything is unpacked.

Downloads go to a persistent cache (VERL_BOOTSTRAP_TEST_CACHE/bundle-cache), so a second run
bundles from disk.
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from scaffold import process_scratch, run_tool
from verlrepo import CACHE

BUNDLE_CACHE = CACHE / "bundle-cache"


def tool_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI run with the bundle cache, and uv's cache of this process."""
    cache = {"VERL_BOOTSTRAP_CACHE": str(BUNDLE_CACHE), "UV_CACHE_DIR": str(_uv_cache())}
    return {**os.environ, **cache, **extra}


@functools.cache
def _uv_cache() -> Path:
    """uv's cache for this process's bundle runs, removed at exit. A bundle install is offline
    from files unpacked in a folder of the run's, and uv caches a file by its path: in the user's
    cache each run left its own copy of the CPU stack (2.4 GB for test_bundle*.py), never read
    again."""
    return process_scratch("vb-bundle-uv-")


def bundle_tool(
    *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`run_tool` with the bundle cache unless `env` is given (optionally under `prefix`, e.g.
    unshare -n); a bundle of real wheels may take long."""
    return run_tool(*args, env=env or tool_env(), prefix=prefix, timeout=1200)


def make_bundle(lock: Path, output: Path) -> Path:
    """`bundle --lockfile LOCK -o OUTPUT`, once (kept when it exists)."""
    if output.is_file():
        return output
    output.parent.mkdir(parents=True, exist_ok=True)  # bundle -o writes into an existing folder
    done = run_tool("bundle", "--lockfile", str(lock), "-o", str(output))
    assert done.returncode == 0, done.stdout + done.stderr
    return output


@functools.cache
def no_network() -> tuple[str, ...]:
    """A command prefix that runs its command with no network: a network namespace with no
    interfaces where this user may make one; else every proxy pointing at a closed port."""
    done = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if done.returncode == 0:
        return ("unshare", "-n")
    closed = "http://127.0.0.1:9"
    proxies = [f"{v}={closed}" for v in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")]
    proxies += [f"{v.lower()}={closed}" for v in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")]
    return ("env", *proxies, f"PIP_INDEX_URL={closed}/simple", "UV_INDEX_URL=" + closed)


def manifest_of(bundle: Path) -> dict[str, Any]:
    """The bundle's manifest as JSON (its first member)."""
    with tarfile.open(bundle, "r|") as tar:
        first = tar.next()
        assert first is not None and first.name == "manifest.json"
        handle = tar.extractfile(first)
        assert handle is not None
        data: dict[str, Any] = json.load(handle)
        return data


def manifest_only(bundle: Path, dest: Path, **changes: Any) -> Path:
    """A tar holding only `bundle`'s manifest, with `changes` applied: enough to be refused for
    not fitting the host (its members are never read)."""
    body = json.dumps({**manifest_of(bundle), **changes}).encode()
    with tarfile.open(dest, "w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return dest


def flip_byte(bundle: Path, dest: Path, member: str) -> Path:
    """A copy of `bundle` with one byte of `member`'s data changed (the manifest unchanged)."""
    with tarfile.open(bundle) as tar:
        offset = tar.getmember(member).offset_data + 1000
    subprocess.run(["cp", "--reflink=auto", str(bundle), str(dest)], check=True)
    with dest.open("r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return dest


def run_post_offline(definition: Path, root: Path, env: dict[str, str]) -> str:
    """Do what `apptainer build` does with `definition`, with / moved to `root` and no network:
    copy its %files (from the definition's folder), then run its %post with sh; return the
    output. The commands are the definition's own, read back from the file."""
    from apptainerdef import body, parse_definition  # noqa: PLC0415

    parsed = parse_definition(definition.read_text(encoding="utf-8"))
    for line in body(parsed, "files"):
        source, dest = line.split()
        target = root / Path(dest).relative_to("/opt")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(definition.parent / source, target)  # the build copies; a link is as good here
    script = "\n".join(body(parsed, "post"))
    argv = [*no_network(), "sh", "-c", script]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
        env={**env, "VERL_IMAGE_ROOT": str(root)},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return output
