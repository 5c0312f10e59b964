"""The pytest command line `verl-bootstrap test` runs in the env: verl's CPU test files, pytest's
settings confined to the checkout, the progress plugin, and pytest-timeout's limit where the env
has it."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["PATTERN", "PLUGIN", "confined_to", "pytest_args", "with_plugin"]

PATTERN = "*_on_cpu.py"
PLUGIN = "verl_bootstrap_progress"  # the module name progress_plugin.py gets in the run


_CONFIGS = (
    ("pytest.ini", None),
    (".pytest.ini", None),
    ("pyproject.toml", "[tool.pytest.ini_options]"),
    ("tox.ini", "[pytest]"),
    ("setup.cfg", "[tool:pytest]"),
)


def confined_to(checkout: Path, *, scratch: Path) -> list[str]:
    """pytest's settings and conftest files from the checkout only, never from a folder above it.

    Without a settings file of its own (verl has none), pytest walks up from the checkout and
    takes the first one it finds: a checkout inside another project ran with that project's
    `filterwarnings = error`, and verl's own "torchtitan engine is not available" warning
    became an import error. The checkout's own settings win; else an empty file stands in.
    """
    own = next(
        (checkout / name for name, section in _CONFIGS if _is_config(checkout / name, section)),
        None,
    )
    if own is None:
        own = scratch / "pytest.ini"
        own.write_text("[pytest]\n", encoding="utf-8")
    return ["-c", str(own), f"--rootdir={checkout}", f"--confcutdir={checkout}"]


def _is_config(path: Path, section: str | None) -> bool:
    if not path.is_file():
        return False
    return section is None or section in path.read_text(encoding="utf-8", errors="replace")


def with_plugin(scratch: Path) -> dict[str, str]:
    """Put the progress plugin where the run imports it from, and say where it writes."""
    shutil.copyfile(Path(__file__).with_name("progress_plugin.py"), scratch / f"{PLUGIN}.py")
    return {"PYTHONPATH": str(scratch), "VERL_BOOTSTRAP_PROGRESS": str(scratch / "progress.txt")}


def pytest_args(
    python: Path,
    junit: Path,
    files: tuple[str, ...],
    *,
    tools: dict[str, bool],
    settings: list[str],
    collect_only: bool,
    test_timeout: float | None,
    keyword: str | None = None,
) -> list[str]:
    args = [
        str(python),
        "-m",
        "pytest",
        *settings,
        "-p",
        "no:cacheprovider",
        "-p",
        PLUGIN,
        "-o",
        f"python_files={PATTERN}",
        "--continue-on-collection-errors",
        "-q",
        "-rN",
        f"--junitxml={junit}",
    ]
    if collect_only:
        args.append("--collect-only")
    if tools["pytest_asyncio"]:
        args.append("--asyncio-mode=auto")
    if test_timeout is not None and tools["pytest_timeout"]:  # else the watchdog alone
        args.append(f"--timeout={test_timeout:g}")
    if keyword:
        args += ["-k", keyword]
    return [*args, *files]
