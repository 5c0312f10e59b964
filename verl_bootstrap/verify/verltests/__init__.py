"""verl's own CPU test suite, run against a built env, with each failure classified."""

from __future__ import annotations

import time
from pathlib import Path

from verl_bootstrap.paths import checkout_dir, logs_dir
from verl_bootstrap.verify.verltests.suite import SuiteReport, find_test_files, run_suite

__all__ = ["SuiteReport", "run_verl_tests"]


def run_verl_tests(
    prefix: Path,
    *,
    checkout: Path | None = None,
    files: tuple[str, ...] = (),
    allow_downloads: bool = False,
    collect_only: bool = False,
    timeout: float | None = None,
    test_timeout: float | None = None,
    tests: tuple[str, ...] = (),
    keyword: str | None = None,
) -> SuiteReport:
    """Run the CPU test files of the env's checkout (default PREFIX/src/verl) in the env: all,
    the `files`, or the tests `tests` names (files or node ids FILE::TEST), -k `keyword`."""
    source = checkout or checkout_dir(prefix)
    selected = find_test_files(source, files + tests)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log = logs_dir(prefix) / f"verl-tests-{stamp}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    return run_suite(
        prefix,
        source,
        files=selected,
        log_path=log,
        allow_downloads=allow_downloads,
        collect_only=collect_only,
        timeout=timeout,
        test_timeout=test_timeout,
        targets=(*files, *tests) if tests else (),
        keyword=keyword,
    )
