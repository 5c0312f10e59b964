"""A folder is a project, as with uv or pixi: `lock --profile NAME` writes
./lockfiles/NAME/VARIANT-PLATFORM.lock.yaml, and the next command in that folder (plan, install,
export, bundle) takes that lockfile first, before the lab's and the one committed with the tool;
each names it on its first line by a path the user can open from there. A folder lockfile that
does not fit is passed over with a note saying why. The real `lock` then `export` in one folder
is real_slow (a lock against the index); the rest reads lockfiles already made.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from lockfixtures import CUTOFF, HOST_XY
from scaffold import run_tool

from verl_bootstrap.cli.optionsbuilder import run_options
from verl_bootstrap.cli.parse import build_parser
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.lockroute import read_line, route_line
from verl_bootstrap.run.installrun import prepare_plan
from verl_bootstrap.run.state.envrecord import record_of

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
OWN = Path("lockfiles") / "cpu" / "cpu-linux-64.lock.yaml"  # where `lock` writes, in a folder


def _project(folder: Path, lock: dict[str, object] | None = None) -> Path:
    """`folder` holding its own cpu lockfile (the committed one's content, or `lock`)."""
    (folder / OWN).parent.mkdir(parents=True)
    if lock is None:
        shutil.copy2(COMMITTED, folder / OWN)
    else:
        (folder / OWN).write_text(yaml.safe_dump(lock, sort_keys=False), encoding="utf-8")
    return folder


def test_plan_and_export_in_a_folder_take_its_own_lockfile_and_name_it(tmp_path: Path) -> None:
    _project(tmp_path)
    plan = run_tool("plan", "--profile", "cpu", cwd=tmp_path, timeout=300)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith(f"from lockfile {OWN} (locked 2026-12-01, "), plan.stdout[:300]
    route = json.loads(run_tool("plan", "--profile", "cpu", "--json", cwd=tmp_path).stdout)
    assert route["route"]["origin"] == "folder"
    assert Path(route["route"]["lockfile"]) == tmp_path / OWN
    export = run_tool("export", "--format", "pylock", "--profile", "cpu", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    assert export.stderr.splitlines()[0] == f"from lockfile {OWN} (locked 2026-12-01)"
    dry = run_tool("export", "--format", "pylock", "--profile", "cpu", "-o", "x.toml", "--dry-run")
    assert str(COMMITTED) in dry.stdout  # in the tool's checkout: the committed one is its own


def test_a_folder_lockfile_that_does_not_fit_is_passed_over_with_a_note(tmp_path: Path) -> None:
    stale = yaml.safe_load(COMMITTED.read_text(encoding="utf-8"))
    stale["profile_hash"] = "sha256:" + "0" * 64  # locked from another version of the profile
    _project(tmp_path, stale)
    plan = run_tool("plan", "--profile", "cpu", cwd=tmp_path, timeout=300)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith(f"from lockfile {COMMITTED} ("), plan.stdout[:300]
    note = f"not this folder's lockfile: the folder lockfile {OWN} is stale: profile cpu changed"
    assert note in plan.stdout


def test_the_folder_lockfile_a_run_took_is_the_one_its_env_names_for_a_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`verl-bootstrap --prefix P` from another folder must install the same lockfile again: the
    env's record names it (as it names a lab's that --locked took), from the plan the run makes."""
    monkeypatch.chdir(_project(tmp_path))
    ns = build_parser("plan").parse_args(["plan", "--profile", "cpu", "--prefix", "env"])
    plan = prepare_plan(run_options(ns))
    assert plan.locked is not None and plan.locked.origin == "folder"
    made = record_of(plan)
    assert made["options"]["lockfile"] == str(tmp_path / OWN)
    assert made["lockfile"]["origin"] == "folder"


def test_from_the_root_folder_a_lockfile_is_named_by_its_whole_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A script run from / (a login shell's `sh /shared/onboard.sh`, a cron job): `tmp/x` is
    under / but reads as a relative path from nowhere."""
    monkeypatch.chdir("/")
    assert route_line(COMMITTED, None, "").startswith(f"from lockfile {COMMITTED} (")
    assert read_line(COMMITTED, None) == f"from lockfile {COMMITTED}"


@pytest.mark.real_slow
def test_lock_then_export_in_one_folder_agree(tmp_path: Path, verl_repo_session: Path) -> None:
    """`lock --profile cpu` writes ./lockfiles/…; `export` and `plan` in that folder read it."""
    lock = run_tool(
        *("lock", "--profile", "cpu", "--python-version", HOST_XY, "--exclude-newer", CUTOFF),
        *("--verl-source", str(verl_repo_session)),
        cwd=tmp_path,
        timeout=900,
    )
    assert lock.returncode == 0, lock.stderr[-3000:]
    assert lock.stdout.strip().endswith(str(OWN)), lock.stdout  # "wrote lockfiles/cpu/…"
    written = read_lockfile(tmp_path / OWN)
    export = run_tool(
        "export", "--format", "requirements", "--profile", "cpu", "-o", "req", cwd=tmp_path
    )
    assert export.returncode == 0, export.stderr
    assert export.stderr.splitlines()[0] == f"from lockfile {OWN} (locked {CUTOFF[:10]})"
    exported = {}
    for file in sorted((tmp_path / "req").glob("*.txt")):
        for line in file.read_text(encoding="utf-8").splitlines():
            if "==" in line and not line.startswith(("#", " ")):
                name, _, version = line.split(" ")[0].partition("==")
                exported[name] = version
    # verl itself is its git checkout, installed editable: not a pin of the requirements files
    locked = {n: d.version for n, d in written.distributions().items() if n != "verl"}
    assert len(locked) > 100
    assert {n: exported.get(n) for n in locked} == locked
    plan = run_tool(
        "plan", "--profile", "cpu", "--verl-source", str(verl_repo_session), cwd=tmp_path
    )
    assert plan.stdout.startswith(f"from lockfile {OWN} ("), plan.stdout[:300] + plan.stderr
