"""The command line: exit codes, help, `profiles`, and the pinned `--json` envelopes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from scaffold import run

from verl_bootstrap import __version__
from verl_bootstrap import cli as cli_errors
from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED, EXIT_STEP_FAILED, Refused
from verl_bootstrap.profile import PROFILES_DIR, list_profiles

# The keys scripts and CI read from `--json`. Adding a key is fine (add it here); renaming or
# removing one breaks every consumer, so this contract test must fail first.
PLAN_KEYS = {
    "schema",
    "profile",
    "prefix",
    "backend",
    "variant",
    "variant_reason",
    "verl",
    "route",
    "notes",
    "hash_gaps",
    "steps",
}
PLAN_STEP_KEYS = {"id", "kind", "deps", "description", "commands", "env", "fingerprint"}
INSTALL_KEYS = {
    "schema",
    "ok",
    "profile",
    "prefix",
    "variant",
    "activate",
    "log_dir",
    "steps",
    "route",
    "verify",
    "drift",  # what the run found changed since the env's record, and repaired (test_env_trust)
    "notes",
    "build_progress",
}
INSTALL_STEP_KEYS = {"id", "status", "seconds", "reason", "log"}
ERROR_KEYS = {"ok", "error"}
ERROR_DETAIL_KEYS = {"message", "hint", "exit_code", "kind", "data"}


def test_help_lists_the_commands_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == EXIT_OK
    assert out.startswith("usage: \n  verl-bootstrap --profile NAME")
    for command in ("install", "plan", "verify", "profiles"):
        assert command in out
    assert "Exit codes: 0 ok, 1 a step failed, 2 bad input, 3 refused" in " ".join(out.split())


def test_install_help_shows_the_main_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["install", "--help"], capsys)
    assert code == EXIT_OK
    for flag in (
        "--profile",
        "--prefix",
        "--verl-source",
        "--cuda",
        "--installer",
        "--json",
        "--dry-run",
        "--force",
        "--wait",
    ):
        assert flag in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == EXIT_OK
    assert out.strip() == f"verl-bootstrap {__version__}"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--profile", "cpu", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["plan", "--profile", "cpu", "--backend", "docker"], "invalid choice: 'docker'"),
        (["plan", "--profile", "cpu", "--installer", "conda"], "invalid choice: 'conda'"),
        (["profiles"], "the following arguments are required: ACTION"),
        (["--profile", "cpu", "--wait", "soon"], "'soon' is not a number of seconds"),
    ],
)
def test_a_bad_flag_exits_2_with_an_error_and_a_hint(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert err.startswith("error: verl-bootstrap ")
    assert says in err
    assert "\nhint: " in err


@pytest.mark.parametrize("command", [[], ["plan"]])
def test_an_unknown_profile_exits_2_naming_the_shipped_ones(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "env"
    code, _, err = run([*command, "--profile", "nope", "--prefix", str(prefix)], capsys)
    assert code == EXIT_BAD_INPUT
    assert "error: unknown profile 'nope'" in err
    assert f"hint: shipped profiles: {', '.join(list_profiles())}" in err
    assert not prefix.exists()


def test_a_malformed_index_flag_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--profile", "cpu", "--prefix", str(tmp_path / "p"), "--index", "mirror"]
    code, _, err = run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert "error: --index 'mirror': expected NAME=URL" in err


def test_a_missing_local_verl_source_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-repo"
    argv = [
        "plan",
        "--profile",
        "cpu",
        "--prefix",
        str(tmp_path / "p"),
        "--verl-source",
        str(missing),
    ]
    code, _, err = run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert f"--verl-source {str(missing)!r} is neither a URL nor an existing path" in err


def test_plan_and_dry_run_exit_0_and_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "env"
    code, out, _ = run(["plan", "--profile", "cpu", "--prefix", str(prefix)], capsys)
    assert code == EXIT_OK
    assert "profile cpu → " in out
    code, out, _ = run(["--profile", "cpu", "--prefix", str(prefix), "--dry-run", "--json"], capsys)
    assert code == EXIT_OK
    assert json.loads(out)["schema"] == "verl-bootstrap.plan/1"
    assert not prefix.exists()


# --- profiles ----------------------------------------------------------------------------------


def test_profiles_list_shows_each_shipped_profile_with_its_variants(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["profiles", "list"], capsys)
    assert code == EXIT_OK
    header, *lines = out.splitlines()
    assert header.split()[0] == "PROFILE"
    rows = {line.split()[0]: line.split()[1] for line in lines if line.strip()}
    assert sorted(rows) == list_profiles()
    assert rows["cpu"] == "cpu"
    assert set(rows["fsdp"].split(",")) == {"cu130", "cu128"}


def test_profiles_show_prints_the_resolved_profile(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["profiles", "show", "fsdp"], capsys)
    assert code == EXIT_OK
    shown = yaml.safe_load(out)
    assert shown["name"] == "fsdp"
    assert shown["env"]["backend"] == "conda"  # inherited from vllm-only
    assert "extends" not in shown
    code, out, _ = run(["profiles", "show", "cpu", "--json"], capsys)
    assert code == EXIT_OK
    body = json.loads(out)
    assert [s["id"] for s in body["stages"]] == ["torch", "verl-deps", "tests"]
    assert body["stages"][-1]["option"] == "tests"  # installed only with --with-tests


def test_profiles_show_of_a_ref_without_a_stack_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["profiles", "show", "cpu", "--verl-ref", "v0.0.1"], capsys)
    assert code == EXIT_BAD_INPUT
    assert "has no stack for verl ref 'v0.0.1'" in err


@pytest.mark.parametrize("name", list_profiles())
def test_profiles_validate_accepts_every_shipped_profile(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = PROFILES_DIR / f"{name}.yaml"
    code, out, _ = run(["profiles", "validate", str(path)], capsys)
    assert code == EXIT_OK
    assert out.startswith(f"{path}: valid profile {name!r}: stages ")


def test_profiles_validate_accepts_a_file_that_extends_a_shipped_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("schema_version: 1\nextends: cpu\nverify: {imports: [yaml]}\n")
    code, out, _ = run(["profiles", "validate", str(mine)], capsys)
    assert code == EXIT_OK
    assert out.strip() == (
        f"{mine}: valid profile 'mine': stages torch, verl-deps, plus optional tests (--with-tests)"
    )


# --- the --json contracts ----------------------------------------------------------------------


def test_plan_json_envelope_keys_are_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["plan", "--profile", "cpu", "--prefix", str(tmp_path), "--json"], capsys)
    assert code == EXIT_OK
    body = json.loads(out)
    assert set(body) == PLAN_KEYS
    assert set(body["verl"]) == {"repo", "ref"}
    assert set(body["route"]) == {"kind", "line", "lockfile", "origin"}
    for step in body["steps"]:
        assert set(step) == PLAN_STEP_KEYS


def test_install_json_envelope_keys_are_pinned(
    tmp_path: Path, verl_repo_session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A cheap real run: the ref does not exist, so fetch-source fails and the rest is aborted.
    argv = [
        "--profile",
        "cpu",
        "--prefix",
        str(tmp_path / "env"),
        "--json",
        "--verl-source",
        str(verl_repo_session),
        "--verl-ref",
        "v0.0.0",
        "--allow-unsupported-ref",
    ]
    code, out, _ = run(argv, capsys)
    assert code == EXIT_STEP_FAILED
    body: dict[str, Any] = json.loads(out)
    assert set(body) == INSTALL_KEYS
    assert body["schema"] == "verl-bootstrap.install/1"
    assert body["ok"] is False
    assert body["activate"] is None
    assert body["verify"] is None
    for step in body["steps"]:
        assert set(step) == INSTALL_STEP_KEYS
    steps = {s["id"]: s for s in body["steps"]}
    assert steps["fetch-source"]["status"] == "failed"
    assert steps["fetch-source"]["reason"].startswith("verl ref 'v0.0.0' not found")
    assert steps["install-verl"]["status"] == "aborted"


def test_error_json_envelope_keys_are_pinned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["plan", "--profile", "nope", "--prefix", str(tmp_path / "p"), "--json"]
    code, out, err = run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    body = json.loads(out)
    assert set(body) == ERROR_KEYS
    assert set(body["error"]) == ERROR_DETAIL_KEYS
    assert body["ok"] is False
    assert body["error"]["exit_code"] == EXIT_BAD_INPUT
    assert body["error"]["message"] == "unknown profile 'nope'"
    assert body["error"]["kind"] == "InputError"
    assert "error: unknown profile 'nope'" in err  # stderr says it too


class _Url:
    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def test_an_errors_data_is_in_its_json_redacted_as_its_message_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "https://user:s3cret@lab.invalid/simple/"
    where = _Url(url)  # not a str (a URL object): redacted as its text
    refused = Refused(f"cannot reach {url}", data={"urls": [url], "tries": 2, "at": where})
    assert cli_errors._report_error(refused, json_mode=True) == EXIT_REFUSED
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "Refused" and error["data"]["tries"] == 2
    assert error["data"]["urls"] == [error["message"].removeprefix("cannot reach ")]
    assert "s3cret" not in json.dumps(error)
