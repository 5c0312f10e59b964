"""What the lockfile commands decide, asked of the library directly (locking.lockcommand and
export.target): the CLI only parses the flags and prints these answers (test_cli_export and
test_lock_format run the same paths through the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_bootstrap.errors import InputError
from verl_bootstrap.lock.diff import version_diff
from verl_bootstrap.lock.export.target import export_output, planned_files, refuse_overwrite
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.lockcommand import LockJob, lock_path, lock_targets, named_lockfile
from verl_bootstrap.paths import LOCKFILES_DIR


def test_all_skips_the_script_profiles_and_says_why() -> None:
    targets = lock_targets(None, None, every=True)
    assert ("cpu", "cpu") in targets.pairs
    assert all(not name.endswith("-script") for name, _ in targets.pairs)
    assert targets.skipped
    assert all("install script" in line for line in targets.skipped)


def test_all_with_a_variant_keeps_the_profiles_that_have_it() -> None:
    assert lock_targets(None, "cpu", every=True).pairs == [("cpu", "cpu")]


def test_a_variant_the_profile_lacks_is_refused_naming_its_variants() -> None:
    with pytest.raises(InputError) as caught:
        lock_targets("cpu", "cu130", every=False)
    assert "has no such variant" in caught.value.message
    assert "cpu" in (caught.value.hint or "")
    with pytest.raises(InputError, match="--profile NAME or --all"):
        lock_targets(None, None, every=False)


def test_a_lockfile_goes_to_output_else_its_place_in_the_folder(tmp_path: Path) -> None:
    job = LockJob(output=tmp_path / "one.lock.yaml", folder=tmp_path / "dir")
    assert lock_path(job, "cpu", "cpu", single=True) == tmp_path / "one.lock.yaml"
    elsewhere = lock_path(job, "cpu", "cpu", single=False)
    assert elsewhere.is_relative_to(tmp_path / "dir")
    own = Path.cwd() / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"  # the cwd's: read first
    assert lock_path(LockJob(), "cpu", "cpu", single=True) == own


def test_a_profile_with_several_lockfiles_names_the_one_it_took() -> None:
    several = named_lockfile("export", None, "fsdp", None, "linux-64")
    assert several.path.is_relative_to(LOCKFILES_DIR)
    assert several.note is not None
    assert "--cuda chooses among" in several.note
    one = named_lockfile("export", None, "cpu", None, "linux-64")
    assert one.note is None
    assert one.lock.profile == "cpu"
    with pytest.raises(InputError, match="export: pass --lockfile PATH or --profile NAME"):
        named_lockfile("export", None, None, None, "linux-64")


def test_an_export_goes_to_stdout_only_for_one_file_formats(tmp_path: Path) -> None:
    assert export_output("pylock", None, json_report=False) is None
    assert export_output("pylock", Path("-"), json_report=False) is None
    assert export_output("requirements", None, json_report=False) == Path("requirements")
    with pytest.raises(InputError, match="writes several files"):
        export_output("requirements", Path("-"), json_report=False)
    with pytest.raises(InputError, match="--json reports the files written"):
        export_output("pylock", None, json_report=True)
    mine = tmp_path / "pylock.toml"
    mine.write_text("the user's")
    with pytest.raises(InputError, match="does not overwrite"):
        refuse_overwrite(mine, force=False)
    refuse_overwrite(mine, force=True)
    assert mine.read_text() == "the user's"  # deciding writes nothing


def test_the_dry_run_names_one_requirements_file_per_hashed_stage(tmp_path: Path) -> None:
    lock = read_lockfile(LOCKFILES_DIR / "cpu" / "cpu-linux-64.lock.yaml")
    files = planned_files(lock, "requirements", tmp_path, bundle=None)
    hashed = [s for s in lock.stages if s.kind != "install-verl"]
    assert len(files) == len(hashed) > 0
    assert files[0] == str(tmp_path / f"01-{hashed[0].id}.txt")
    assert planned_files(lock, "pylock", None, bundle=None) == ["-"]


def test_a_lock_against_itself_changes_nothing() -> None:
    lock = read_lockfile(LOCKFILES_DIR / "cpu" / "cpu-linux-64.lock.yaml")
    assert version_diff(lock, lock) == ()
