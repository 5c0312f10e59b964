"""The surface a person meets: help for every command (a description, examples, a help line for
every flag), "did you mean" for typos, bare invocation and `help`, one meaning per flag."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from clitree import LEAVES, subparser
from scaffold import run
from tinyenv import kernel_wheel

from verl_bootstrap.cli import commands
from verl_bootstrap.cli.parse import build_parser
from verl_bootstrap.cli.registry import COMMANDS, NAMES, Command
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.lock.drift import committed_lockfiles
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import LOCKFILES_DIR


def test_every_command_is_wired_to_its_own_module() -> None:
    """A leaf's wire gives `flags_NAME` and `cmd_NAME` of cli/commands/NAME.py (an action's, of
    its group's module); a group has no wire of its own."""

    def walk(commands: tuple[Command, ...], group: str = "") -> None:
        for c in commands:
            assert (c.wire is None) == bool(c.actions), c.name
            if c.actions:
                walk(c.actions, c.name)
                continue
            assert c.wire is not None
            key, module = c.name.replace("-", "_"), f"verl_bootstrap.cli.commands.{group or c.name}"
            for function, prefix in zip(c.wire(), ("flags_", "cmd_"), strict=True):
                assert (function.__module__, function.__name__) == (module, prefix + key)

    walk(COMMANDS)


def test_the_commands_package_names_each_module_once() -> None:
    folder = Path(commands.__file__).parent
    assert sorted(commands.__all__) == sorted(p.stem for p in folder.glob("[!_]*.py"))


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_command_has_a_description_examples_and_help_for_each_flag(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([*path, "--help"], capsys)
    assert code == EXIT_OK
    summary = out.split("\n\n")[1]
    assert summary.strip(), out
    examples = out.split("examples:\n", 1)[1].splitlines()
    assert len(examples) >= 2
    assert all(e.startswith("  verl-bootstrap ") or "verl-bootstrap " in e for e in examples)
    parser = subparser(build_parser(None), path)
    bare = [a.dest for a in parser._actions if a.help is None and a.dest != "help"]
    assert not bare, f"flags without help in {' '.join(path)}: {bare}"


def test_every_command_with_a_result_takes_json() -> None:
    # they print a script, or run the user's command (whose output is its own)
    plain = {("activate",), ("completion",), ("cluster", "script"), ("run",)}
    parser = build_parser(None)
    for path in LEAVES:
        if path in plain:
            continue
        flags = {s for a in subparser(parser, path)._actions for s in a.option_strings}
        assert "--json" in flags, " ".join(path)


def test_every_command_that_changes_something_takes_dry_run() -> None:
    changing = [
        ("install",),
        ("remove",),
        ("update",),
        ("envs", "prune"),
        ("wheelhouse", "add"),
        ("lock",),
        ("export",),
        ("bundle",),
        ("onboard",),
        ("cluster", "install"),
        ("kernels", "coverage"),  # with --refresh: it rewrites the recorded lists
    ]
    parser = build_parser(None)
    for path in changing:
        flags = {s for a in subparser(parser, path)._actions for s in a.option_strings}
        assert "--dry-run" in flags, " ".join(path)


def test_profile_help_says_its_default_once(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["install", "--help"], capsys)
    options = out.split("\noptions:\n", 1)[1]
    profile = " ".join(options.split("--profile NAME", 1)[1].split("--prefix", 1)[0].split())
    assert profile.count("(default:") == 1, profile


@pytest.mark.parametrize("argv", [[], ["help"], ["-h"]])
def test_bare_invocation_and_help_print_the_main_call(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    assert "verl-bootstrap --profile NAME" in out
    for name in NAMES:
        assert f"\n    {name}" in out


def test_help_of_a_command_is_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["help", "envs"], capsys)
    assert code == EXIT_OK
    assert "the envs verl-bootstrap has built" in out
    assert "prune" in out


@pytest.mark.parametrize(
    ("argv", "guess"),
    [
        (["pln", "--profile", "cpu"], "did you mean `verl-bootstrap plan`?"),
        (["env", "list"], "did you mean `verl-bootstrap envs`?"),
        (["hlep"], "did you mean `verl-bootstrap help`?"),
        (["--profle", "cpu"], "did you mean --profile?"),
        (["plan", "--profile", "cpu", "--verl-rfe", "v0.9.1"], "did you mean --verl-ref?"),
        (["envs", "lst"], "did you mean 'list'?"),
        (["plan", "--profile", "cpu", "--backend", "vnev"], "did you mean 'venv'?"),
    ],
)
def test_a_typo_is_answered_with_did_you_mean(
    argv: list[str], guess: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert out == ""
    assert err.startswith("error: ")
    assert f"hint: {guess}" in err


def test_an_unknown_profile_is_answered_with_did_you_mean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["plan", "--profile", "fspd"], capsys)
    assert code == EXIT_BAD_INPUT
    assert "did you mean 'fsdp'?" in err


def test_profiles_list_json_lists_every_shipped_profile(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["profiles", "list", "--json"], capsys)
    assert code == EXIT_OK
    body = json.loads(out)
    names = {p["name"] for p in body["profiles"]}
    assert {"cpu", "fsdp"} <= names
    assert next(p for p in body["profiles"] if p["name"] == "cpu")["cuda_variants"] == ["cpu"]


def test_completion_takes_the_shell_as_a_flag_and_refuses_the_old_word(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["completion", "--shell", "bash"], capsys)
    assert code == EXIT_OK
    assert "verl-bootstrap" in out
    code, _, err = run(["completion", "bash"], capsys)
    assert code == EXIT_BAD_INPUT
    assert "hint: verl-bootstrap completion --shell bash" in err


def _in_a_fresh_interpreter(probe: str) -> str:
    """What `probe` prints, run by a new Python that imports this checkout's package."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    ).stdout


def test_help_loads_no_library_module() -> None:
    """`--help` and the bare help stay fast: pydantic and the adapters are not imported."""
    probe = (
        "import sys, contextlib, io\n"
        "from verl_bootstrap.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main([])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'verl_bootstrap.cli.'))))"
    )
    loaded = _in_a_fresh_interpreter(probe)
    assert "pydantic" not in loaded
    assert "verl_bootstrap.cli.commands." not in loaded  # not one command's module
    assert "verl_bootstrap.cli.parse" in loaded  # (the probe sees the modules it loaded)


def test_a_command_loads_its_own_module_alone() -> None:
    """`lock --help` imports cli/commands/lock.py and no other command's module."""
    probe = (
        "import sys, contextlib, io\n"
        "from verl_bootstrap.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['lock', '--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('verl_bootstrap.cli.commands.')))"
    )
    loaded = _in_a_fresh_interpreter(probe)
    assert loaded.strip() == "['verl_bootstrap.cli.commands.lock']"


def test_no_command_module_or_flags_load_pydantic_or_yaml() -> None:
    """A command's `--help` imports its module and adds its flags, never the library: every
    command's module imported and every flag added (the full parser), pydantic and PyYAML are
    still not loaded; the handlers' imports wait until one runs."""
    probe = (
        "import sys\n"
        "from verl_bootstrap.cli import build_parser\n"
        "build_parser(None)\n"
        "loaded = [m for m in sys.modules if m.startswith('verl_bootstrap.cli.commands.')]\n"
        "print(len(loaded), sorted({'pydantic', 'yaml'} & set(sys.modules)))"
    )
    loaded = _in_a_fresh_interpreter(probe).strip()
    modules = len(
        list((Path(__file__).resolve().parents[1] / "verl_bootstrap/cli/commands").glob("[!_]*.py"))
    )
    assert loaded == f"{modules} []"


def test_install_help_groups_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["install", "--help"], capsys)
    assert code == EXIT_OK
    sections = out.split("\n\n")
    titles = (
        "where the env goes:",
        "what it installs:",
        "where packages and verl come from:",
        "how the run behaves:",
    )
    for title in titles:
        section = next(s for s in sections if s.startswith(title))
        assert section.count("\n  --") >= 3, section
    behaviour = next(s for s in sections if s.startswith("how the run behaves:"))
    assert "--dry-run" in behaviour and "--yes" in behaviour
    assert "--profile NAME" in next(s for s in sections if s.startswith("what it installs:"))


def test_wheelhouse_add_dry_run_publishes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = kernel_wheel(tmp_path, "flash_attn", "2.8.3")
    house = tmp_path / "house"
    key = "torch=2.11.0,cuda=13.0,cxx11abi=TRUE,python=cp312,platform=linux_x86_64"
    argv = ["wheelhouse", "add", str(wheel), "--key", key, "--wheelhouse", str(house)]
    code, out, err = run([*argv, "--dry-run"], capsys)
    assert code == EXIT_OK, err
    assert out.startswith(f"would add {wheel.name} to ")
    assert not any(house.rglob("*.whl")) and not (house / "index.json").exists()


def test_lock_refuses_python_with_the_new_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["lock", "--profile", "cpu", "--python", "3.12"], capsys)
    assert code == EXIT_BAD_INPUT
    assert "--python is spelled --python-version here" in err


def test_the_regenerate_line_of_every_committed_lockfile_parses_as_lock_takes_it() -> None:
    parser = build_parser(None)
    paths = committed_lockfiles(LOCKFILES_DIR, None)
    assert paths
    for path in paths:
        lock = read_lockfile(path)
        words = shlex.split(lock.regenerate)
        assert words[:2] == ["verl-bootstrap", "lock"], lock.regenerate
        ns = parser.parse_args(words[1:])
        assert (ns.profile, ns.cuda, ns.platform) == (
            lock.profile,
            lock.cuda.variant,
            lock.platform,
        )
        assert ns.python_version == lock.python, path
        assert f"# Regenerate with: {lock.regenerate}\n" in path.read_text(encoding="utf-8")
