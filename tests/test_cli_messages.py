"""Messages that say what is so: `config show` has no empty heading, `profiles validate` and
`profiles show` agree on a profile's stages, and the shown profile holds no null fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scaffold import run

from verl_bootstrap.cli import main
from verl_bootstrap.errors import EXIT_OK

ROOT = Path(__file__).resolve().parents[1]


def test_config_show_ends_no_heading_without_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("VERL_BOOTSTRAP_CONFIG", raising=False)
    code, text, _ = run(["config", "show"], capsys)
    assert code == EXIT_OK
    lines = text.splitlines()
    for heading, following in zip(lines, [*lines[1:], ""], strict=True):
        if heading.endswith(":") and not heading.startswith(" "):
            assert following.startswith("  "), f"empty heading {heading!r}"


@pytest.mark.parametrize("name", ["cpu", "fsdp"])
def test_validate_and_show_agree_on_the_stages(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, said, _ = run(["profiles", "validate", str(ROOT / "profiles" / f"{name}.yaml")], capsys)
    assert code == EXIT_OK
    code, shown, _ = run(["profiles", "show", name], capsys)
    assert code == EXIT_OK
    body = yaml.safe_load(shown)
    ids = [s["id"] for s in body["stages"]]
    always = [s["id"] for s in body["stages"] if not s.get("option")]
    assert f"stages {', '.join(always)}" in said
    for stage in body["stages"]:
        if stage.get("option"):
            assert f"{stage['id']} (--with-{stage['option']})" in said
    assert len(ids) == len(set(ids))
    assert "null" not in shown


def test_doctor_with_a_profile_never_says_no_profile_was_chosen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["doctor", "--profile", "fsdp", "--json", "--skip-check", "network"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    for name in ("driver-vs-plan", "gpu-vs-build"):
        finding = checks[name]["finding"]
        assert "no profile" not in finding, finding
        assert "fsdp" in finding or checks[name]["status"] != "skipped", finding
