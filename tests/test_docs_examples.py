"""The examples in README.md and docs/ run as written: every `verl-bootstrap ...` line of their
code blocks parses with the real parser (each flag there, each value one it takes), and those that
need no GPU and change nothing run for real here. The README's first block's install
(`verl-bootstrap --profile cpu`) is tests/test_e2e_cpu.py's; `--profile fsdp` is the heavy tier's.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from scaffold import TOOL

from verl_bootstrap.cli.parse import build_parser
from verl_bootstrap.cli.registry import NAMES

ROOT = Path(__file__).resolve().parents[1]
_LINE = re.compile(r'^\s*(?:\$\s+)?(?:eval "\$\(|source <\(|\. <\()?verl-bootstrap\b(.*)$')
_BLOCK = re.compile(r"```(?:console|bash|sh|shell|text)?\n(.*?)```", re.S)


def _examples() -> list[tuple[str, list[str]]]:
    """(where, argv) of every verl-bootstrap line in the docs' code blocks."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in _BLOCK.findall(doc.read_text(encoding="utf-8")):
            for line in block.replace("\\\n", " ").splitlines():
                match = _LINE.match(line)
                if match is None:
                    continue
                words = re.split(r"\s[|>]|\)|\s#|;|&&", match.group(1))[0]
                words = re.sub(r"(\S+?)\|\S+", r"\1", words)  # a synopsis's a|b: the first
                words = words.replace("[", "").replace("]", "").replace("SECONDS", "60")
                argv = shlex.split(words)
                if not argv or argv[0].startswith("-"):
                    argv = ["install", *argv]  # `verl-bootstrap --profile NAME` is install
                found.append((f"{doc.name}: {line.strip()}", argv))
    return found


EXAMPLES = _examples()


def test_the_docs_have_examples() -> None:
    assert len(EXAMPLES) > 40


@pytest.mark.parametrize(("where", "argv"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_every_example_parses_with_the_real_parser(where: str, argv: list[str]) -> None:
    assert argv[0] in NAMES, where
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            build_parser(argv[0]).parse_args(argv)
    except SystemExit as exc:
        assert not exc.code, f"{where}: {errors.getvalue()}"


# the examples that need no GPU, no network and change nothing: run as written
RUNNABLE = [
    ["--help"],
    ["plan", "--profile", "cpu"],
    ["plan", "--profile", "fsdp", "--cuda", "cu130", "--cuda-arch", "9.0"],
    ["profiles", "list"],
    ["profiles", "show", "fsdp"],
    ["envs", "list"],
    ["config", "show"],
    ["completion", "--shell", "bash"],
    ["lock", "--check", "--profile", "cpu"],
    ["kernels", "coverage"],
]


@pytest.mark.parametrize("argv", RUNNABLE, ids=" ".join)
def test_the_runnable_examples_run(argv: list[str], tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VERL_BOOTSTRAP_HOME": str(tmp_path)}
    done = subprocess.run(
        [str(TOOL), *argv],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr


def test_the_docs_speak_of_the_product_not_of_how_it_was_made() -> None:
    story = re.compile(r"agents?|sessions?|issue [0-9]+", re.I)
    found = [
        f"{doc.name}:{number}: {line.strip()}"
        for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if story.search(line)
    ]
    assert not found, "\n".join(found)
