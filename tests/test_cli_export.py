"""export as a uv user expects it: a one-file format goes to stdout unless --output names a file
(`-` is stdout too), a file that is there is never replaced without --force, and a GPU profile's
export takes the variant that has a lockfile (or says which variants there are)."""

from __future__ import annotations

from pathlib import Path

import pytest
from scaffold import run

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.lock.io import read_lockfile


@pytest.mark.parametrize("output", [[], ["--output", "-"]])
def test_a_one_file_format_goes_to_stdout_and_writes_nothing(
    output: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["export", "--format", "pylock", "--profile", "cpu", *output], capsys)
    assert code == EXIT_OK, err
    assert 'lock-version = "1.0"' in out
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_there_is_replaced_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "pylock.toml"
    target.write_text("mine\n")
    argv = ["export", "--format", "pylock", "--profile", "cpu", "-o", str(target)]
    code, _, err = run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert "is already there; export does not overwrite it" in err
    assert target.read_text() == "mine\n"
    code, out, _ = run([*argv, "--force"], capsys)
    assert code == EXIT_OK
    assert out.strip() == f"wrote {target}"
    assert 'lock-version = "1.0"' in target.read_text()


def test_a_gpu_profile_takes_the_variant_that_has_a_lockfile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Dockerfile format carries the lockfile itself (pylock and requirements ask the index
    for every file's URL: the same choice, minutes slower for a GPU stack)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["export", "--format", "dockerfile", "--profile", "fsdp"], capsys)
    assert code == EXIT_OK, err
    assert "note: the cu130 lockfile of fsdp (--cuda chooses among cu130, cu128)" in err
    carried = read_lockfile(tmp_path / "verl-bootstrap.lock.yaml")
    assert (carried.profile, carried.cuda.variant) == ("fsdp", "cu130")


def test_no_lockfile_for_the_platform_names_the_variants_and_a_lock_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["export", "--format", "pylock", "--profile", "cpu", "--platform", "linux-aarch64"]
    code, _, err = run(argv, capsys)
    assert code == EXIT_BAD_INPUT
    assert "has no committed lockfile for linux-aarch64 (its variants: cpu)" in err
    assert "verl-bootstrap lock --profile cpu --cuda cpu --platform linux-aarch64" in err


def test_stdout_is_refused_for_a_format_of_several_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(
        ["export", "--format", "requirements", "--profile", "cpu", "-o", "-"], capsys
    )
    assert code == EXIT_BAD_INPUT
    assert "writes several files" in err
