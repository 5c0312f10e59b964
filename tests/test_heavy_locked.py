"""The heavy tier's locked rows: each committed cu130 x86_64 GPU lock installed here as a user
installs it, then verified.

For fsdp, sglang, vllm-only and megatron, `lockfiles/P/cu130-linux-64.lock.yaml` is installed
with the CLI a user runs (`--backend venv --cuda cu130 --lockfile ...`, so every artifact is
hash-checked), from an empty uv cache (time and download include every download), with a user's
pip settings (the default index alone: this machine's find-links, extra indexes and constraints
are its own), on this host without a GPU or an NVIDIA driver. Then `verify`: every check that
needs no GPU must pass. What verify skips for want of the driver, a GPU or FFmpeg says why in
its own words; a kernel stage whose prebuilt wheel this host cannot reach (verl's wheelhouse and
the community builds are on GitHub) is left out of the install and named, with the imports only
it brings (bench/heavylock.py: the lock less that stage, never something in its place). Any
other failed check, step or refusal fails the row. A committed lock that is stale for its
profile is a failure too (the CLI would refuse it without --frozen); the row still installs it,
so that the rest is seen.

Rows go to build/heavy/results.json beside the resolving rows of tests/test_heavy.py;
`python bench/heavy_table.py` prints both tables. One row:

    .venv/bin/pytest -m heavy -s tests/test_heavy_locked.py -k fsdp
"""

from __future__ import annotations

import os
import platform
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from heavysupport import HEAVY, ROOT, HeavyResult, download_bytes, save_results, tree_bytes
from scaffold import tool_json

from bench.heavylock import Derived, derive
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.lock.format import Lockfile, profile_hash
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.stacks import apply_stack

pytestmark = pytest.mark.heavy

LOCKED = ("fsdp", "sglang", "vllm-only", "megatron")
VARIANT, PLATFORM = "cu130", "linux-64"
INSTALL_TIMEOUT = 3600.0


@pytest.fixture(scope="module")
def locked_table() -> Iterator[list[HeavyResult]]:
    rows: list[HeavyResult] = []
    yield rows
    save_results(rows)


@pytest.fixture
def user_pip(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's pip settings for this test and the tool it runs: the default index alone."""
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as on CI


def committed_lock(name: str) -> Path:
    """The committed lockfile a locked row installs."""
    return ROOT / "lockfiles" / name / f"{VARIANT}-{PLATFORM}.lock.yaml"


def shown_route(line: str, derived: Derived, committed: str) -> str:
    """The run's route line, naming the committed lock (the derived one is a scratch file)."""
    if not derived.left_out:
        return line.replace(str(derived.lockfile), committed)
    return line.replace(str(derived.lockfile), f"{committed} less the stages named")


def classify_checks(row: HeavyResult, report: dict[str, Any], derived: Derived) -> None:
    """Each verify check as passed, not provable here (verify's own reason, or an import only a
    left-out stage brings), or failed."""
    for check in report.get("checks", []):
        name, status, detail = check["name"], check["status"], check["detail"] or ""
        row.checks[name] = status
        if status == "skipped":
            row.not_provable[name] = detail.removeprefix("skipped: ")[:200]
        elif status == "fail" and (stage := derived.explains(name, detail)):
            row.checks[name] = "left out"
            row.not_provable[name] = f"needs stage {stage}, left out here"
        elif status == "fail":
            last = detail.strip().splitlines()[-1] if detail.strip() else ""
            row.failures.append(f"{name}: {last[:300]}")


def stale(lock: Lockfile, name: str, path: str) -> str | None:
    """Why the committed lock does not fit its profile today (None: it fits)."""
    profile = apply_stack(load_profile(name), lock.verl.ref)
    if profile_hash(profile, VARIANT) == lock.profile_hash:
        return None
    return (
        f"{path} is stale: profile {name} changed since it was locked (the CLI refuses it "
        "without --frozen; installed as it is here)"
    )


def step_failures(report: dict[str, Any]) -> list[str]:
    """Every step but verify that did not end done or skipped, and a refusal."""
    found = [
        f"step {s['id']} {s['status']}: {s.get('reason', '')}"
        for s in report.get("steps", [])
        if s["status"] not in ("done", "skipped") and s["id"] != "verify"
    ]
    if "error" in report:
        found.append(f"refused: {report['error'].get('message', '')}")
    return found


@pytest.mark.timeout(INSTALL_TIMEOUT + 1800)
@pytest.mark.parametrize("name", LOCKED)
def test_each_committed_gpu_lock_installs_and_verifies_here(
    name: str, tmp_path: Path, locked_table: list[HeavyResult], user_pip: None
) -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the linux-64 locks are for x86_64 hosts")
    path = committed_lock(name)
    shown = str(path.relative_to(ROOT))
    lock = read_lockfile(path)
    row = HeavyResult(profile=name, variant=VARIANT, ref=lock.verl.ref, lockfile=shown)
    locked_table.append(row)
    row.failures += [why for why in [stale(lock, name, shown)] if why]
    label = f"{name}-{VARIANT}-locked"
    work = HEAVY / "work" / label  # not under pytest's tmp: other sessions prune its folders
    shutil.rmtree(work, ignore_errors=True)
    prefix, cache = work / "env", {"UV_CACHE_DIR": str(work / "uv-cache")}
    try:
        derived = _derived(name, lock, path, tmp_path, cache)
        row.failures += derived.refused
        row.not_provable.update({f"stage {g.stage}": g.note() for g in derived.left_out})
        _install(row, derived, prefix, cache)
        _verify(row, derived, prefix, cache)
        if env_python(prefix).exists():
            row.env_bytes = tree_bytes(prefix)
            row.python = lock.python
            row.download_bytes = download_bytes(
                env_python(prefix), lock.python, tmp_path / "dl", env=cache
            )
    finally:
        _keep_logs(prefix, label)
        shutil.rmtree(work, ignore_errors=True)
    row.result = "FAILED" if row.failures else "passed, partly" if row.not_provable else "passed"
    assert not row.failures, row.failures


def _derived(name: str, lock: Lockfile, path: Path, folder: Path, cache: dict[str, str]) -> Derived:
    """The lock less what this host cannot reach, from the kernel wheels `plan` chooses."""
    profile = apply_stack(load_profile(name), lock.verl.ref)
    argv = ["plan", "--profile", name, "--cuda", VARIANT, "--backend", "venv", "--lockfile"]
    argv += [str(path), "--frozen", "--prefix", str(folder / "planned"), "--json"]
    code, plan, stderr = tool_json(*argv, timeout=600, add_env=cache)
    assert code == 0 and plan, f"plan failed (exit {code}): {stderr[-2000:]}"
    return derive(profile, VARIANT, lock, plan, folder / "derived")


def _install(row: HeavyResult, derived: Derived, prefix: Path, cache: dict[str, str]) -> None:
    argv = ["install", "--profile", str(derived.profile), "--lockfile", str(derived.lockfile)]
    argv += ["--prefix", str(prefix), "--backend", "venv", "--cuda", VARIANT]
    argv += ["--skip-check", "disk", "--json"]
    started = time.monotonic()
    code, report, stderr = tool_json(*argv, timeout=INSTALL_TIMEOUT, add_env=cache)
    row.seconds = round(time.monotonic() - started, 1)
    if not report:
        row.failures.append(f"no report (exit {code}): {stderr.strip()[-300:]}")
        return
    row.route = shown_route(str((report.get("route") or {}).get("line", "")), derived, row.lockfile)
    row.steps = {s["id"]: float(s["seconds"]) for s in report.get("steps", [])}
    row.failures += step_failures(report)


def _verify(row: HeavyResult, derived: Derived, prefix: Path, cache: dict[str, str]) -> None:
    """`verify --prefix` as a user runs it after the install (its checks, whatever the install's
    own verify step said)."""
    if not env_python(prefix).exists():
        return
    argv = ["verify", "--prefix", str(prefix), "--profile", str(derived.profile), "--json"]
    code, report, stderr = tool_json(*argv, timeout=900, add_env=cache)
    if not report.get("checks"):
        row.failures.append(f"verify gave no checks (exit {code}): {stderr.strip()[-300:]}")
        return
    classify_checks(row, report, derived)


def _keep_logs(prefix: Path, label: str) -> None:
    logs = HEAVY / "logs" / label
    shutil.rmtree(logs, ignore_errors=True)
    if (prefix / ".verl-bootstrap" / "logs").is_dir():
        shutil.copytree(prefix / ".verl-bootstrap" / "logs", logs)
