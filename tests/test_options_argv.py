"""RunOptions.to_argv: the one rendering of a run's options as `install` flags (cluster's node
install, onboard's install and the resume hint all use it). Parsing what it renders gives the same
options back."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from verl_bootstrap.cli.optionsbuilder import run_options
from verl_bootstrap.cli.parse import build_parser
from verl_bootstrap.lab.cluster.command import install_args
from verl_bootstrap.options import RunOptions, declared, options_argv
from verl_bootstrap.run.state.hints import resume_command


@pytest.fixture(autouse=True)
def _no_site_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the site config a case names: none from this user's home or the environment."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VERL_BOOTSTRAP_CONFIG", raising=False)


def _parse(argv: list[str]) -> RunOptions:
    return run_options(build_parser("install").parse_args(["install", *argv]))


def _cases(tmp: Path) -> dict[str, list[str]]:
    site = tmp / "site.yaml"
    site.write_text("schema_version: 1\n", encoding="utf-8")
    lock = tmp / "cpu.lock.yaml"
    return {
        "least": ["--profile", "cpu", "--prefix", str(tmp / "a")],
        "what and where": [
            *("--profile", "fsdp", "--prefix", str(tmp / "b b"), "--cuda", "cu128"),
            *("--backend", "venv", "--installer", "pip", "--verl-ref", "v0.9.1"),
            *("--verl-source", str(tmp / "verl"), "--allow-unsupported-ref", "--with-tests"),
            *("--cuda-arch", "9.0", "--cuda-arch", "10.0", "--python", sys.executable),
        ],
        "sources and behaviour": [
            *("--profile", "cpu", "--prefix", str(tmp / "c"), "--offline", "--require-gpu"),
            *("--index", "default=http://mirror.invalid/simple", "--index", "x=file:///w"),
            *("--channel", "file:///conda", "--conda-exe", "/opt/mamba", "--train", "none"),
            *("--wait", "30", "--skip-check", "disk", "--skip-check", "visibility"),
        ],
        "locked with a site config": [
            *("--profile", "cpu", "--prefix", str(tmp / "d"), "--locked", "--lockfile", str(lock)),
            *("--config", str(site)),
        ],
        "frozen": ["--profile", "cpu", "--prefix", str(tmp / "e"), "--frozen"],
        "resolve, tests said off": [
            *("--profile", "cpu", "--prefix", str(tmp / "f"), "--resolve", "--no-with-tests"),
        ],
    }


@pytest.mark.parametrize(
    "case",
    [
        "least",
        "what and where",
        "sources and behaviour",
        "locked with a site config",
        "frozen",
        "resolve, tests said off",
    ],
)
def test_parsing_what_to_argv_renders_gives_the_options_back(tmp_path: Path, case: str) -> None:
    options = _parse(_cases(tmp_path)[case])
    assert _parse(options.to_argv()) == options


def test_the_cases_give_every_option_with_a_flag_a_value_other_than_its_default(
    tmp_path: Path,
) -> None:
    """The round trip covers every option: a new one is rendered, or this test names it."""
    parsed = [_parse(argv) for argv in _cases(tmp_path).values()]
    left = [
        o.name
        for o in declared()
        if o.spec.flags and all(getattr(p, o.name) == o.default for p in parsed)
    ]
    assert left == []


def test_a_toggle_said_off_is_its_no_spelling_and_a_switch_off_is_nothing() -> None:
    assert options_argv({"with_tests": False, "offline": False}) == ["--no-with-tests"]
    assert options_argv({"with_tests": True, "offline": True}) == ["--offline", "--with-tests"]


def test_an_option_without_a_flag_is_refused() -> None:
    with pytest.raises(ValueError, match="site"):
        options_argv({"site": None})


def test_the_node_install_and_the_resume_hint_are_rendered_by_it() -> None:
    args = install_args("cpu", "/scratch/$SLURMD_NODENAME", "/labs/cpu.lock.yaml", "lab.yaml")
    assert (
        args
        == RunOptions(
            profile="cpu",
            prefix=Path("/scratch/$SLURMD_NODENAME"),
            guard_wait=3600.0,
            locked=True,
            lockfile=Path("/labs/cpu.lock.yaml"),
            config="lab.yaml",
        ).to_argv()
    )
    assert args[args.index("--wait") + 1] == "3600"
    hint = resume_command(Path("/envs/my env"))
    assert shlex.split(hint) == ["verl-bootstrap", "--prefix", "/envs/my env"]
