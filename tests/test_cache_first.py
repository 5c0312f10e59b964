"""A locked install asks uv's cache first and goes online only for what the cache lacks.

Real uv installs a real wheel, hash-pinned by URL, from a loopback server that records each
request: with an empty uv cache the cache-only try fails, the step's log says so and the same
install runs online; a second env with that cache asks the server nothing.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from verl_bootstrap import proc
from verl_bootstrap.errors import CommandFailed
from verl_bootstrap.installer.cmdline import InstallRequest, install_command, uv_binary
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.steps.stepcontext import StepContext, run_cache_first

FALLBACK = "uv's cache does not hold every locked file: the same install, online"


def _tiny_wheel(folder: Path) -> Path:
    """A real pure wheel: one module, its METADATA, WHEEL and RECORD."""
    folder.mkdir(parents=True)
    wheel = folder / "vb_cachefirst-1.0-py3-none-any.whl"
    files = {
        "vb_cachefirst.py": b"VALUE = 1\n",
        "vb_cachefirst-1.0.dist-info/METADATA": (
            b"Metadata-Version: 2.1\nName: vb-cachefirst\nVersion: 1.0\n"
        ),
        "vb_cachefirst-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("vb_cachefirst-1.0.dist-info/RECORD,,")
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("vb_cachefirst-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


class _Recorded(http.server.SimpleHTTPRequestHandler):
    paths: list[str] = []  # noqa: RUF012 - shared by the server's handler instances

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.paths.append(self.path)
        super().do_GET()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The wheel at a loopback URL (the requests it gets are in _Recorded.paths)."""
    wheel = _tiny_wheel(tmp_path / "files")
    handler = functools.partial(_Recorded, directory=str(wheel.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorded.paths.clear()
    yield f"http://127.0.0.1:{server.server_port}/{wheel.name}", wheel
    server.shutdown()
    thread.join()


def _env(tmp: Path, name: str) -> Path:
    proc.run([uv_binary(), "venv", "-q", "--python", sys.executable, str(tmp / name)])
    return tmp / name / "bin" / "python"


def _install(python: Path, requirements: Path, *, offline: bool) -> list[str]:
    request = InstallRequest(
        python=python, requirements=requirements, no_deps=True, offline=offline
    )
    return install_command("uv", request, IndexSettings())


def _context(tmp: Path, log: str) -> StepContext:
    plan = prepare_plan(
        RunOptions(profile="cpu", prefix=tmp / "plan"),
        driver=None,
        detect=False,
        check_optional=False,
    )
    return StepContext(plan, plan.step("verl-deps"), tmp / log, prior={})


def test_a_locked_install_asks_uv_cache_first_then_online_for_what_it_lacks(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, wheel = served
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirements = tmp_path / "locked.txt"
    requirements.write_text(f"vb-cachefirst @ {url} \\\n    --hash=sha256:{sha}\n")
    env = {"UV_CACHE_DIR": str(tmp_path / "uv-cache")}  # empty: a user's first env

    first = _env(tmp_path, "first")
    context = _context(tmp_path, "first.log")
    run_cache_first(
        context,
        _install(first, requirements, offline=True),
        _install(first, requirements, offline=False),
        env=env,
    )
    log = context.log_path.read_text()
    assert "--offline" in log and FALLBACK in log
    assert _Recorded.paths and set(_Recorded.paths) == {f"/{wheel.name}"}  # fetched online
    assert list((tmp_path / "first").rglob("vb_cachefirst.py"))

    _Recorded.paths.clear()
    second = _env(tmp_path, "second")
    context = _context(tmp_path, "second.log")
    run_cache_first(
        context,
        _install(second, requirements, offline=True),
        _install(second, requirements, offline=False),
        env=env,
    )
    assert FALLBACK not in context.log_path.read_text()
    assert _Recorded.paths == []  # the cache's copy, checked against the pinned sha256
    assert list((tmp_path / "second").rglob("vb_cachefirst.py"))


def test_a_pinned_sha256_the_file_does_not_have_fails_both_tries(
    served: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = served
    requirements = tmp_path / "locked.txt"
    requirements.write_text(f"vb-cachefirst @ {url} \\\n    --hash=sha256:{'0' * 64}\n")
    python = _env(tmp_path, "env")
    context = _context(tmp_path, "env.log")
    with pytest.raises(CommandFailed):
        run_cache_first(
            context,
            _install(python, requirements, offline=True),
            _install(python, requirements, offline=False),
            env={"UV_CACHE_DIR": str(tmp_path / "uv-cache")},
        )
    assert "Hash mismatch" in context.log_path.read_text()
    assert not list((tmp_path / "env").rglob("vb_cachefirst.py"))
