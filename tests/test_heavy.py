"""The heavy tier (`make test-heavy`): every shipped GPU profile proven as far as this host allows.

1. Every stack of every shipped profile (each verl ref, CUDA variant and Python) resolves stage by
   stage, each stage constrained by the pins of the stages before it, as the installs run.
2. Every shipped GPU profile x CUDA variant installs for real at its own verl ref, with the CLI a
   user runs (`--backend venv --cuda VARIANT` on this host without a GPU), then `verify` runs:
   imports, versions, `uv pip check`; the GPU smoke test reports "skipped: no NVIDIA driver".
   Each install gets its own empty uv cache, so the wall time includes every download; wall
   time, download size and env size are recorded, then the env and that cache are deleted (one
   at a time: uv hard-links the env to its cache, so the disk holds about one env, ~10-15 GB).
   The preflight disk check is skipped (`--skip-check disk`, as a user may): it counts pip's and
   conda's caches as well, which a venv install with uv does not fill.

What cannot complete here is reported as "not provable here: <reason>", never as passed: a stage
whose distributions are sdists of CUDA code (flash-attn, TransformerEngine's PyTorch extension)
is left out of the install and the imports that need it are named; an import that fails for want
of the NVIDIA driver (libcuda) is named as such; a script stage needs GitHub. The results go to
build/heavy/results.json and the table is printed at the end (bench/heavy_table.py renders it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from heavysupport import (
    PLATFORMS,
    Compiled,
    HeavyResult,
    compile_requirements,
    download_bytes,
    host_python,
    index_args,
    requirement_name,
    save_results,
    sdists_blamed,
    source_builds,
    stage_requirements,
    tree_bytes,
)
from packaging.specifiers import SpecifierSet
from scaffold import tool_json
from verlrepo import verl_pyproject_dir

from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.profile import list_profiles, load_profile
from verl_bootstrap.profile.models import Profile
from verl_bootstrap.profile.stacks import apply_stack, supported_refs
from verl_bootstrap.profile.stagespec import StageSpec, stage_specs
from verl_bootstrap.profile.verlextras import marker_env, stage_pins

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ROOT / "build" / "heavy"
INSTALL_TIMEOUT = 3600.0
# Older stacks installed too (the engine profiles: their stacks need no source build but
# flash-attn); VERL_BOOTSTRAP_HEAVY_OLDER=0 leaves them out.
OLDER_REFS = (
    {"vllm-only": ("v0.8.0", "v0.6.1"), "sglang": ("v0.8.0", "v0.6.1")}
    if os.environ.get("VERL_BOOTSTRAP_HEAVY_OLDER", "1") != "0"
    else {}
)
SCRIPT_REASON = (
    "verl's scripts/install_vllm_sglang_mcore.sh comes only from a git checkout (GitHub; verl's "
    "sdist lacks it) and downloads from GitHub (flash-attn wheel, TransformerEngine, Megatron-LM)"
)


def _gpu_cases() -> list[tuple[str, str, str | None]]:
    cases: list[tuple[str, str, str | None]] = []
    for name in list_profiles():
        base = load_profile(name)
        if not base.gpu:
            continue
        for ref in (None, *OLDER_REFS.get(name, ())):
            profile = apply_stack(base, ref)
            cases += [(name, v, ref) for v in profile.cuda_variants if v != "cpu"]
    return cases


def _stack_cases() -> list[tuple[str, str, str, str]]:
    cases = []
    for name in list_profiles():
        base = load_profile(name)
        for ref in supported_refs(base):
            profile = apply_stack(base, ref)
            pythons = [p for p in ("3.11", "3.12") if p in SpecifierSet(profile.python.requires)]
            cases += [(name, ref, v, p) for v in profile.cuda_variants for p in pythons]
    return cases


# ---------------------------------------------------------------------------------------------
# 1. every stack resolves


def _release(profile: Profile) -> str | None:
    found = re.match(r"^v?(\d+\.\d+\.\d+)$", profile.verl.ref)
    return found.group(1) if found else None


def _resolve_stage(
    stage: StageSpec, pins: list[str], *, release: str | None, python: str, workdir: Path
) -> tuple[Compiled, str]:
    """Resolve one stage on the oldest glibc that has wheels for it; (result, platform)."""
    done = Compiled(ok=False)
    for plat in PLATFORMS:
        done = compile_requirements(
            stage_requirements(stage, release),
            python=python,
            workdir=workdir,
            constraints=pins,
            overrides=stage.overrides,
            env=stage.env,
            platform=plat,
            only_binary=stage.no_build_isolation,
            no_deps=stage.no_deps,
        )
        if done.ok or "matching platform tag" not in done.error:
            return done, plat
    return done, PLATFORMS[-1]


def _only_sdists(stage: StageSpec, error: str) -> bool:
    """The stage failed only because its own distributions are sdists (a source build)."""
    names = [requirement_name(p) for p in stage.packages]
    blamed = sdists_blamed(error)
    return bool(blamed) and all(any(b.startswith(n) for n in names) for b in blamed)


@pytest.mark.parametrize(("name", "ref", "variant", "python"), _stack_cases())
def test_every_stack_resolves_stage_by_stage(
    name: str, ref: str, variant: str, python: str, tmp_path: Path
) -> None:
    profile = apply_stack(load_profile(name), ref)
    pins: list[str] = []
    asked: set[str] = set()
    protected = {requirement_name(p) for p in profile.protected}
    for each in stage_specs(profile, variant):
        if each.kind == "script":
            continue  # its packages are chosen by the script itself; see the install test
        # a stage that takes verl's pins reads them from that release's own pyproject.toml, as
        # the lock and the install do; what a later stage installs is left out of this one
        pinned = (
            stage_pins(
                each,
                verl_pyproject_dir(_release(profile) or "0.9.1"),
                marker_env(python, "linux-64"),
            )
            if each.pins_from_verl
            else each
        )
        stage = replace(pinned, overrides=(*each.overrides, *each.exclusion_overrides()))
        done, plat = _resolve_stage(
            stage, pins, release=_release(profile), python=python, workdir=tmp_path / stage.id
        )
        if stage.no_build_isolation and not done.ok:
            # a source-build stage: the index has the version, as an sdist only
            assert _only_sdists(stage, done.error), done.error
            continue
        assert done.ok, f"{name} {ref} {variant} py{python} stage {stage.id}: {done.error}"
        for dist, spec in stage.expect.items():
            have = done.version(requirement_name(dist))
            assert have is not None and have in SpecifierSet(spec, prereleases=True), (
                f"stage {stage.id}: {dist} {have} does not meet {spec}"
            )
        # as the lock resolves: what earlier stages asked for (and the protected packages)
        # stays at its version; what they merely pulled in may move (tensordict 0.10.0, which
        # verl's extras reach through TransferQueue, takes a packaging < 26 the engine's did not)
        asked |= {requirement_name(p) for p in stage.packages} | protected
        found = {*pins, *done.pins} - {p for p in done.pins if p.startswith("verl==")}
        pins = sorted(p for p in found if requirement_name(p) in asked)
        if plat != PLATFORMS[0]:
            print(f"\n{name} {ref} {variant} py{python} stage {stage.id}: needs {plat}")


# ---------------------------------------------------------------------------------------------
# 2. every GPU profile x variant installs and verifies for real


@pytest.fixture(scope="module")
def table() -> Iterator[list[HeavyResult]]:
    rows: list[HeavyResult] = []
    yield rows
    save_results(rows)


def _provable_profile(profile: Profile, blocked: dict[str, dict[str, str]], folder: Path) -> Path:
    """The profile at its ref minus the stages this host cannot build (data, same code path).

    `profile` has its stack applied already: the copy takes that stack as its own (its ref, and
    its stages with their release-day cutoff) and carries no stacks.
    """
    body: dict[str, Any] = {
        "schema_version": 1,
        "name": profile.name,
        "extends": profile.name,
        "description": f"{profile.description} (without: {', '.join(blocked) or 'nothing'})",
        "verl": profile.verl.model_dump(mode="json"),
        "python": profile.python.model_dump(mode="json"),
        "cuda_variants": {k: v.model_dump(mode="json") for k, v in profile.cuda_variants.items()},
        "stages": [
            s.model_dump(mode="json", exclude_defaults=True)
            for s in profile.stages
            if s.id not in blocked
        ],
        "verify": profile.verify.model_dump(mode="json"),
        # what verl's extras declare and a left-out stage would have installed stays out
        "substitutions": [
            *(s.model_dump(mode="json", exclude_defaults=True) for s in profile.substitutions),
            *(
                {"replace": requirement_name(p), "reason": "not provable here: a source build"}
                for s in profile.stages
                if s.id in blocked
                for p in s.packages
            ),
        ],
        "stacks": [],
    }
    path = folder / f"{profile.name}-provable-here.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return path


def _only_verify_failed(report: dict[str, Any]) -> bool:
    bad = [s["id"] for s in report.get("steps", []) if s["status"] not in ("done", "skipped")]
    return bad == ["verify"]


def _classify(row: HeavyResult, report: dict[str, Any], blocked_modules: dict[str, str]) -> None:
    for step in report.get("steps", []):
        if step["status"] not in ("done", "skipped") and step["id"] != "verify":
            row.failures.append(f"step {step['id']} {step['status']}: {step['reason']}")
    checks = (report.get("verify") or {}).get("checks", [])
    if not checks and not row.failures and "error" not in report:
        row.failures.append("verify did not run")
    for check in checks:
        name, detail = check["name"], check["detail"]
        if name.startswith("version ") and check["status"] == "ok":
            row.versions[name.removeprefix("version ")] = detail.split()[1]
        if check["status"] == "skipped" and name.startswith("import "):
            # verify's own verdict on a host with no driver: "skipped: needs the NVIDIA driver"
            row.not_provable[name] = detail.removeprefix("skipped: ")[:160]
        if check["status"] != "fail":
            continue
        stage = next((st for mod, st in blocked_modules.items() if mod in detail), None)
        if name.startswith("import ") and stage:
            row.not_provable[name] = f"needs stage {stage}, not built here"
        else:
            row.failures.append(f"{name}: {detail.splitlines()[-1][:200] if detail else ''}")


def _collect_verl_tests(row: HeavyResult, prefix: Path, cache: dict[str, str]) -> None:
    """verl's CPU test files, imported (not run) in the GPU env: no GPU is needed for that.

    From v0.9.1 the GPU profiles install verl's own extras, whose verl-core brings pytest and
    its plugins: the tests are collected with exactly that set. An older stack carries no test
    tools, so pytest goes in first there (this test's own choice, as a user's would be). A file
    that cannot be imported for an env reason is a failure, one that needs the driver or a stage
    not built here is not provable here.
    """
    env = {**os.environ, **cache}
    has_pytest = subprocess.run(
        [str(env_python(prefix)), "-c", "import pytest, pytest_asyncio"],
        capture_output=True,
        check=False,
        timeout=300,
    )
    if has_pytest.returncode != 0:
        install = [
            uv_binary(),
            "pip",
            "install",
            "-q",
            "--python",
            str(env_python(prefix)),
            *index_args(),
            "pytest",
            "pytest-asyncio",
        ]
        subprocess.run(install, env=env, check=True, capture_output=True, timeout=900)
        row.versions["test tools"] = "added: pytest, pytest-asyncio"
    else:
        row.versions["test tools"] = "the profile's own"
    _, body, stderr = tool_json(
        "test", "--prefix", str(prefix), "--collect-only", "--json", timeout=1800, add_env=cache
    )
    if not body:
        row.failures.append(f"verl-bootstrap test --collect-only: {stderr.strip()[-300:]}")
        return
    row.versions["verl tests collected"] = str(body["counts"]["collected"])
    for failure in body["failures"]:
        where = f"collect {failure['nodeid']}"
        if failure["cls"] == "env":
            row.failures.append(f"{where}: {failure['line'][:200]}")
        else:
            row.not_provable[where] = f"{failure['cls']}: {failure['line'][:160]}"


@pytest.mark.timeout(INSTALL_TIMEOUT + 600)
@pytest.mark.parametrize(("name", "variant", "ref"), _gpu_cases())
def test_every_gpu_profile_installs_and_verifies_here(
    name: str, variant: str, ref: str | None, tmp_path: Path, table: list[HeavyResult]
) -> None:
    profile = apply_stack(load_profile(name), ref)
    row = HeavyResult(profile=name, variant=variant, ref=profile.verl.ref)
    table.append(row)
    if any(s.kind == "script" for s in profile.stages):
        row.result = "not provable here"
        row.not_provable["install-script"] = SCRIPT_REASON
        pytest.skip(f"not provable here: {SCRIPT_REASON}")
    python_path, row.python = host_python(profile)
    blocked: dict[str, dict[str, str]] = {}
    for stage in stage_specs(profile, variant):
        why = source_builds(stage, python=row.python, workdir=tmp_path / "probe" / stage.id)
        if why:
            blocked[stage.id] = why
            row.not_provable.update({f"stage {stage.id} ({n})": r for n, r in why.items()})
    modules = {
        requirement_name(p).replace("-", "_"): sid
        for sid in blocked
        for s in profile.stages
        if s.id == sid
        for p in [*s.packages, *(p for v in s.variants.values() for p in (v.packages or ()))]
    }
    derived = _provable_profile(profile, blocked, tmp_path)
    # Not under pytest's tmp: other pytest sessions on this host prune its older folders.
    label = f"{name}-{variant}-{profile.verl.ref}"
    work = HEAVY / "work" / label
    shutil.rmtree(work, ignore_errors=True)
    prefix, cache = work / "env", {"UV_CACHE_DIR": str(work / "uv-cache")}
    argv = ["install", "--profile", str(derived), "--prefix", str(prefix), "--backend", "venv"]
    argv += ["--cuda", variant, "--python", str(python_path), "--skip-check", "disk", "--json"]
    started = time.monotonic()
    code, report, stderr = tool_json(*argv, timeout=INSTALL_TIMEOUT, add_env=cache)
    row.seconds = round(time.monotonic() - started, 1)
    try:
        if _only_verify_failed(report):  # its checks come from `verify`, as a user would see them
            verify_argv = ["verify", "--prefix", str(prefix), "--profile", str(derived), "--json"]
            report = {**report, "verify": tool_json(*verify_argv, timeout=900, add_env=cache)[1]}
        _classify(row, report, modules)
        if "error" in report:
            row.failures.append(f"refused (exit {code}): {report['error']['message']}")
        elif not report:
            row.failures.append(f"no report (exit {code}): {stderr.strip()[-300:]}")
        if env_python(prefix).exists():
            _collect_verl_tests(row, prefix, cache)
            row.env_bytes = tree_bytes(prefix)
            row.download_bytes = download_bytes(
                env_python(prefix), row.python, tmp_path / "dl", env=cache
            )
    finally:
        logs = HEAVY / "logs" / label
        shutil.rmtree(logs, ignore_errors=True)
        if (prefix / ".verl-bootstrap" / "logs").is_dir():
            shutil.copytree(prefix / ".verl-bootstrap" / "logs", logs)
        shutil.rmtree(work, ignore_errors=True)
    if row.failures:
        row.result = "FAILED"
    else:
        row.result = "passed, partly" if row.not_provable else "passed"
    assert not row.failures, row.failures
