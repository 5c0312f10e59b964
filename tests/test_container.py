"""Container definitions from a lockfile: the Dockerfile through Docker's own parser (the Go
BuildKit parser, via the `dockerfile` package) and hadolint, the Apptainer definition through a
strict reader of Apptainer's header and sections; both carry the same install commands, and
those commands, run as a build runs them (conftest's offline_image: %files, then %post, with no
network), leave a verified env and the activation the image's %environment sources.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dockerfile
import pytest
from apptainerdef import SECTIONS, body, parse_definition
from bundlefixtures import bundle_tool

from verl_bootstrap.errors import EXIT_BAD_INPUT

CPU_LOCK = Path(__file__).resolve().parents[1] / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"


def _export(fmt: str, output: Path, *extra: str) -> list[str]:
    done = bundle_tool(
        "export", "--format", fmt, "--lockfile", str(CPU_LOCK), "--output", str(output), *extra
    )
    assert done.returncode == 0, done.stderr
    return [line.removeprefix("wrote ") for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def from_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both definitions of the committed cpu lock, installing from the index."""
    folder = tmp_path_factory.mktemp("context")
    _export("dockerfile", folder / "Dockerfile")
    _export("apptainer", folder / "verl.def")
    return folder


def _run_commands(path: Path) -> list[str]:
    return [" ".join(c.value) for c in dockerfile.parse_file(str(path)) if c.cmd == "RUN"]


def test_the_dockerfile_parses_and_lints_clean(from_index: Path) -> None:
    commands = dockerfile.parse_file(str(from_index / "Dockerfile"))
    assert [c.cmd for c in commands] == ["FROM", "LABEL", "COPY", "COPY", "RUN", "ENV", "CMD"]
    assert commands[0].value == ("python:3.11-bookworm",)
    copied = [c.value[0] for c in commands if c.cmd == "COPY"]
    assert all((from_index / name).is_file() for name in copied), "the build context is complete"
    env = dict(zip(commands[5].value[::2], commands[5].value[1::2], strict=True))
    assert env["VIRTUAL_ENV"] == '"/opt/verl"' and env["PATH"].startswith('"/opt/verl/bin:')
    hadolint = Path(sys.executable).parent / "hadolint"
    linted = subprocess.run(
        [str(hadolint), str(from_index / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_a_broken_dockerfile_is_what_the_parser_refuses(tmp_path: Path) -> None:
    """The parser is real: it refuses what Docker refuses."""
    broken = tmp_path / "Dockerfile"
    broken.write_text("FROM python:3.11-bookworm\nRUN <<EOF\necho never closed\n")
    with pytest.raises(dockerfile.GoParseError):
        dockerfile.parse_file(str(broken))


def test_the_apptainer_definition_has_its_header_and_sections_in_order(from_index: Path) -> None:
    definition = parse_definition((from_index / "verl.def").read_text(encoding="utf-8"))
    assert definition.header == {"Bootstrap": "docker", "From": "python:3.11-bookworm"}
    assert list(definition.sections) == [s for s in definition.sections if s in SECTIONS]
    assert list(definition.sections) == [
        "labels",
        "files",
        "post",
        "environment",
        "runscript",
        "test",
        "help",
    ]
    assert body(definition, "environment") == [". /opt/verl/.verl-bootstrap/activate"]
    assert any("main_ppo" in line for line in body(definition, "help"))
    with pytest.raises(ValueError, match="repeated section"):
        parse_definition("Bootstrap: docker\nFrom: x\n%post\n%post\n")


def test_both_formats_run_the_same_install_commands(from_index: Path) -> None:
    post = body(parse_definition((from_index / "verl.def").read_text(encoding="utf-8")), "post")
    (run,) = _run_commands(from_index / "Dockerfile")
    chained = [part.strip() for part in run.removeprefix("set -eu;").split(" && ")]
    assert post[0] == "set -eu"
    assert " && ".join(chained) == " && ".join(post[1:])
    assert any("--locked --lockfile verl-bootstrap.lock.yaml" in line for line in post)
    assert post[-1].startswith('"$root/verl-bootstrap/tool/bin/verl-bootstrap" --locked')


def test_a_bundle_outside_the_build_context_is_bad_input(tmp_path: Path, cpu_bundle: Path) -> None:
    done = bundle_tool(
        "export",
        "--format",
        "dockerfile",
        "--lockfile",
        str(CPU_LOCK),
        "--output",
        str(tmp_path / "Dockerfile"),
        "--bundle",
        str(cpu_bundle),
    )
    assert done.returncode == EXIT_BAD_INPUT and "beside the definition" in done.stderr


def test_the_definitions_commands_build_a_verified_env_offline(
    offline_image: tuple[Path, str], cpu_bundle: Path
) -> None:
    root, output = offline_image
    assert "verified" in output
    assert (root / "verl" / ".verl-bootstrap" / "activate").is_file()
    tool = root / "verl-bootstrap" / "tool" / "bin" / "verl-bootstrap"
    assert tool.is_file(), "the tool stays in the image, for verify"
    assert not (root / "verl-bootstrap" / "bundle.tar").exists(), "the bundle is not kept"
    assert "✓ verify" in output, "the build ran verify as the install's last step"
    # what `apptainer exec image.sif python -m verl.trainer.main_ppo` gets: %environment first
    activate = root / "verl" / ".verl-bootstrap" / "activate"
    probe = "import sys, verl.trainer.main_ppo; print(sys.prefix)"
    entered = subprocess.run(
        ["sh", "-c", f'. "{activate}" && python -c "{probe}"'],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert entered.returncode == 0, entered.stderr
    assert entered.stdout.strip() == str(root / "verl")
