"""A plan makes each choice once (plan/choices.py): the CUDA variant is chosen by one call of the
real `choose_variant` per `plan`, on the resolve route, the lockfile route and the fallback from
a lockfile the indexes do not serve; the user's options are never rewritten by the choices.

The counter wraps the real function (every module's reference to it), so what it counts is what
planning really calls; nothing it returns is changed."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scaffold import run

from verl_bootstrap import cli
from verl_bootstrap.cli.optionsbuilder import options_and_state, run_options
from verl_bootstrap.cli.parse import build_parser
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.profile import list_profiles, load_profile, variants
from verl_bootstrap.run.compiler.compile import compile_plan
from verl_bootstrap.run.installrun import prepare_plan

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"


def counting(monkeypatch: pytest.MonkeyPatch, real: Callable[..., Any]) -> list[Any]:
    """What `real` returned, one entry per call, from any module that imported it."""
    seen: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    for module in list(sys.modules.values()):
        if getattr(module, real.__name__, None) is real:
            monkeypatch.setattr(module, real.__name__, counted)
    return seen


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (variant, reason) `choose_variant` returned, one entry per call."""
    return counting(monkeypatch, variants.choose_variant)


def chosen(calls: list[tuple[str, str]]) -> list[str]:
    return [variant for variant, _ in calls]


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> dict[str, Any]:
    """`verl-bootstrap plan ARGV --json` in this process, as a user runs it."""
    code, out, _ = run(["plan", *map(str, argv), "--json"], capsys)
    assert code == EXIT_OK
    return dict(json.loads(out))


def gpu_variant(name: str) -> str:
    return next(v for v in load_profile(name).cuda_variants if v != "cpu")


@pytest.mark.parametrize("name", list_profiles())
def test_planning_a_shipped_profile_by_resolving_chooses_its_variant_once(
    name: str, tmp_path: Path, calls: list[tuple[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    cuda = "cpu" if name == "cpu" else gpu_variant(name)
    body = plan_json(
        capsys, "--profile", name, "--prefix", tmp_path / "env", "--cuda", cuda, "--resolve"
    )
    assert chosen(calls) == [cuda]
    assert body["route"]["kind"] == "resolve"


def test_planning_the_committed_lockfile_route_chooses_the_variant_and_reads_the_lock_once(
    tmp_path: Path,
    calls: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads = counting(monkeypatch, read_lockfile)
    body = plan_json(capsys, "--profile", "cpu", "--prefix", tmp_path / "env")
    assert chosen(calls) == ["cpu"]
    assert len(reads) == 1  # the chosen lockfile is read once, by the route
    assert body["route"]["kind"] == "lockfile"
    assert Path(body["route"]["lockfile"]) == COMMITTED


def test_falling_back_from_an_unserved_lockfile_chooses_the_variant_once(
    tmp_path: Path,
    calls: list[tuple[str, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    empty = tmp_path / "empty-index"
    empty.mkdir()
    # an index that serves nothing: the committed lockfile fits, but cannot be fetched here
    monkeypatch.setenv("PIP_INDEX_URL", empty.as_uri())
    compiles = counting(monkeypatch, compile_plan)
    body = plan_json(
        capsys,
        "--profile",
        "cpu",
        "--prefix",
        tmp_path / "env",
        "--index",
        f"pytorch-cpu={empty.as_uri()}",
    )
    assert chosen(calls) == ["cpu"]
    assert len(compiles) == 1  # the route is settled (and fell back) before the one compile
    assert body["route"]["kind"] == "resolve"
    assert body["route"]["line"].startswith("resolving: ")
    assert "could not be looked up" in body["route"]["line"]


def test_locked_with_the_committed_lockfile_leaves_the_options_as_given(tmp_path: Path) -> None:
    ns = build_parser("plan").parse_args(
        ["plan", "--profile", "cpu", "--prefix", str(tmp_path), "--locked"]
    )
    options = run_options(ns)
    plan = prepare_plan(options, driver=None, detect=False, check_optional=False)
    assert plan.options is options  # the choices live in the plan, not in the user's options
    assert plan.locked is not None and plan.locked.path == COMMITTED
    assert plan.named_lockfile is None  # the record names no lockfile the user did not


def test_an_unknown_variant_is_one_message_for_plan_and_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    said = []
    for argv in (["plan", "--prefix", str(tmp_path / "env")], ["lock"]):
        assert cli.main([*argv, "--profile", "cpu", "--cuda", "cu999"]) == EXIT_BAD_INPUT
        said.append(capsys.readouterr().err)
    assert said[0] == said[1]
    assert "--cuda cu999: profile 'cpu' has no such variant" in said[0]


def test_building_the_options_opens_no_bundle(tmp_path: Path) -> None:
    """`--bundle` is opened by the plan (plan.choices), not by the options: building them reads
    nothing of the archive, so one that is not there is only found when planning."""
    missing = tmp_path / "absent.tar"
    argv = ["install", "--bundle", str(missing), "--profile", "cpu", "--prefix", str(tmp_path)]
    options, _ = options_and_state(build_parser().parse_args(argv))
    assert options.lockfile is None and not options.locked and not options.offline
    assert list(tmp_path.iterdir()) == []
