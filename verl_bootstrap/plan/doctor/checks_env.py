"""Checks of an existing env: verl's editable checkout, protected versions, `uv pip check`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from importlib.metadata import Distribution, distributions
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_bootstrap import proc
from verl_bootstrap.installer.cmdline import find_uv
from verl_bootstrap.installer.envs.inventory import editable_path
from verl_bootstrap.paths import state_dir
from verl_bootstrap.plan.doctor.inputs import Context, EnvFacts, exact_env
from verl_bootstrap.plan.doctor.results import CheckResult, fail, ok, skipped, warn
from verl_bootstrap.source import gitquery
from verl_bootstrap.source.gitquery import GitQueryFailed, NotARepository
from verl_bootstrap.source.sourcework import SDIST_MARK

__all__ = [
    "check_pip_check",
    "check_protected_versions",
    "check_verl_source",
    "installed_versions",
    "site_packages",
    "version_matches",
]

_UV_TIMEOUT = 120.0
_REINSTALL = "re-run verl-bootstrap for this prefix (it resumes and reinstalls what differs)"


def site_packages(prefix: Path) -> list[Path]:
    """The env's site-packages folders (conda prefixes and venvs share this layout)."""
    return sorted(prefix.glob("lib/python3*/site-packages"))


def _distributions(prefix: Path) -> dict[str, Distribution]:
    found: dict[str, Distribution] = {}
    for dist in distributions(path=[str(p) for p in site_packages(prefix)]):
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def installed_versions(prefix: Path) -> dict[str, str]:
    """Canonical distribution name -> version, read from the env's metadata on disk."""
    return {name: dist.version for name, dist in _distributions(prefix).items()}


def _env(ctx: Context, name: str) -> EnvFacts | CheckResult:
    if ctx.env is None:
        return skipped(name, "no env to check (pass --prefix or --python)")
    if not ctx.env.exists:
        return skipped(name, f"no env at {ctx.env.prefix} yet", prefix=str(ctx.env.prefix))
    return ctx.env


def _checkout_state(checkout: Path) -> tuple[str, bool] | str:
    """(HEAD's commit, whether tracked files changed) of verl's checkout, or why git cannot say
    (empty: it is not a repository of its own)."""
    try:
        with gitquery.opened(checkout) as repo:
            return gitquery.head_commit(repo), gitquery.has_changes(repo)
    except NotARepository:
        return ""
    except GitQueryFailed as exc:
        return exc.reason


def _editable_checkout(dist: Distribution) -> Path | None:
    """The checkout an editable install points at (PEP 610 direct_url.json), or None."""
    try:
        info = json.loads(dist.read_text("direct_url.json") or "{}")
    except json.JSONDecodeError:
        return None
    return editable_path(info if isinstance(info, dict) else None)


def _verl_commit(env: EnvFacts) -> tuple[Path, str, bool] | CheckResult:
    name, reinstall = "verl-source", f"reinstall it editable: {_REINSTALL}"
    dist = _distributions(env.prefix).get("verl")
    if dist is None and not state_dir(env.prefix).is_dir():
        # an env verl-bootstrap did not build (make gpu-check's PyTorch env): nothing to compare
        return skipped(
            name,
            f"verl is not installed in {env.prefix}, an env verl-bootstrap did not build",
            verl=None,
            built_by_tool=False,
        )
    if dist is None:
        found = f"verl is not installed in {env.prefix}"
        return fail(name, found, reinstall, verl=None, built_by_tool=True)
    checkout = _editable_checkout(dist)
    if checkout is None:
        found = f"verl {dist.version} is not installed editable from a git checkout"
        return fail(name, found, reinstall, verl=dist.version, editable=False)
    state = _checkout_state(checkout)
    if isinstance(state, str) and (checkout / SDIST_MARK).is_file():
        # git was unreachable at install time: the release sdist stands in, its hash recorded
        sdist, sha = (checkout / SDIST_MARK).read_text().split()
        found = f"verl is editable from {checkout}, unpacked from {sdist} (sha256 {sha[:12]}…)"
        return ok(name, found, checkout=str(checkout), sdist=sdist, sdist_sha256=sha)
    if isinstance(state, str):
        fix = f"clone verl into {checkout} again, or {_REINSTALL}"
        why = f" (git: {state})" if state else ""
        return fail(name, f"{checkout} (verl's editable source) is not a git checkout{why}", fix)
    return checkout, *state


def check_verl_source(ctx: Context) -> CheckResult:
    """verl is editable from a git checkout, at the commit the lockfile names."""
    env = _env(ctx, "verl-source")
    if isinstance(env, CheckResult):
        return env
    found = _verl_commit(env)
    if isinstance(found, CheckResult):
        return found
    checkout, commit, changed = found
    want = ctx.inputs.lock_commit
    data = {
        "checkout": str(checkout),
        "commit": commit,
        "lock_commit": want,
        "uncommitted": changed,
    }
    if want and not (commit.startswith(want) or want.startswith(commit)):
        return fail(
            "verl-source",
            f"verl's checkout {checkout} is at {commit[:12]}, the lockfile names {want[:12]}",
            f"git -C {checkout} checkout {want}",
            **data,
        )
    finding = f"verl is editable from {checkout} at {commit[:12]}"
    finding += ", the lockfile's commit" if want else " (no lockfile commit to compare)"
    if changed:
        fix = f"commit or stash them (git -C {checkout} stash) so the env matches its lockfile"
        return warn("verl-source", f"{finding}, with uncommitted changes", fix, **data)
    return ok("verl-source", finding, **data)


def version_matches(installed: str, expected: str) -> bool:
    """'2.11.0+cu130' matches '2.11.0+cu130', '2.11.0' and '>=2.11,<2.12'."""
    try:
        if expected.strip()[:1] in "<>=!~":
            return SpecifierSet(expected).contains(Version(installed), prereleases=True)
        got, want = Version(installed), Version(expected)
    except (InvalidSpecifier, InvalidVersion):
        return installed == expected
    return got == want or (want.local is None and got.public == want.public)


def _protected_names(ctx: Context) -> dict[str, str | None]:
    names: dict[str, str | None] = dict.fromkeys(ctx.profile.protected if ctx.profile else ())
    names.update(ctx.inputs.expected_versions)
    return names


def _protected_problems(wanted: Mapping[str, str | None], have: Mapping[str, str]) -> list[str]:
    problems = []
    for name, want in wanted.items():
        got = have.get(canonicalize_name(name))
        if got is None:
            problems.append(f"{name} is not installed")
        elif want and not version_matches(got, want):
            problems.append(f"{name} is {got}, expected {want}")
    return problems


def check_protected_versions(ctx: Context) -> CheckResult:
    """Protected packages (torch, the cuDNN wheel) are the versions the profile expects."""
    env = _env(ctx, "protected-versions")
    if isinstance(env, CheckResult):
        return env
    wanted = _protected_names(ctx)
    if not wanted:
        return skipped("protected-versions", "no protected packages named by profile or lockfile")
    have = installed_versions(env.prefix)
    found = {n: have.get(canonicalize_name(n)) for n in wanted}
    data = {"expected": wanted, "installed": found}
    problems = _protected_problems(wanted, have)
    if problems:
        fix = f"a later install replaced them; {_REINSTALL}, or pin them with the lockfile"
        return fail("protected-versions", "; ".join(problems), fix, **data)
    shown = ", ".join(f"{n} {v}" for n, v in found.items())
    return ok("protected-versions", f"{shown}, as expected", **data)


def check_pip_check(ctx: Context) -> CheckResult:
    """`uv pip check` finds no missing or conflicting requirements in the env."""
    env = _env(ctx, "pip-check")
    if isinstance(env, CheckResult):
        return env
    uv = find_uv()
    if uv is None:
        return warn("pip-check", "uv is not installed", "pip install uv (verl-bootstrap needs it)")
    args = [uv, "pip", "check", "--python", str(env.python)]
    try:
        done = proc.capture(args, env=exact_env(ctx.environ), timeout=_UV_TIMEOUT)
    except subprocess.TimeoutExpired:
        return warn("pip-check", "uv pip check did not finish", f"run `{' '.join(args)}` by hand")
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    if done.returncode == 0:
        return ok("pip-check", "uv pip check: no missing or conflicting requirements")
    shown = "; ".join(x.strip() for x in lines[:4])
    fix = f"{_REINSTALL}; the whole list: `{' '.join(args)}`"
    return fail("pip-check", f"uv pip check: {shown}", fix, output=lines)
