"""`update --prefix P` for real: an env locked at vbtiny 1.0, then 1.1 published to its find-links
folder; update shows the diff, is refused without --yes, applies it with --yes as a --locked
install, and the record, the env's lockfile and what is installed agree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from scaffold import invoke
from test_lifecycle import state, versions
from tinyenv import publish_wheel, tiny_parts

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED
from verl_bootstrap.lock.io import read_lockfile


@dataclass(frozen=True)
class Tiny:
    prefix: Path
    profile: Path
    links: Path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tiny]:
    root = tmp_path_factory.mktemp("update")
    prefix = root / "env"
    with pytest.MonkeyPatch.context() as patch:
        parts = tiny_parts(root, patch)
        made = invoke(
            [
                "--profile",
                str(parts.profile),
                "--prefix",
                str(prefix),
                "--verl-source",
                str(parts.repo),
                "--cuda",
                "cpu",
            ]
        )
        assert made.code == EXIT_OK, made.err
        yield Tiny(prefix, parts.profile, parts.links)


def test_nothing_newer_says_up_to_date(tiny: Tiny) -> None:
    same = invoke(["update", "--prefix", str(tiny.prefix)])
    assert same.code == EXIT_OK, same.err
    assert f"{tiny.prefix} is up to date" in same.out
    assert not (tiny.prefix / ".verl-bootstrap" / "updates").exists()


def test_a_newer_release_is_shown_then_refused_without_yes(tiny: Tiny) -> None:
    publish_wheel(tiny.links, "vbtiny", "1.1")
    before = (tiny.prefix / ".verl-bootstrap" / "state.json").read_bytes()
    shown = invoke(["update", "--prefix", str(tiny.prefix), "--dry-run", "--json"])
    assert shown.code == EXIT_OK, shown.err
    assert shown.json()["changes"] == [{"name": "vbtiny", "old": "1.0", "new": "1.1"}]
    refused = invoke(["update", "--prefix", str(tiny.prefix)])  # stdin is no terminal
    assert refused.code == EXIT_REFUSED
    assert "  vbtiny: 1.0 → 1.1\n" in refused.err
    assert f"verl-bootstrap update --prefix {tiny.prefix} --yes" in refused.err
    assert (tiny.prefix / ".verl-bootstrap" / "state.json").read_bytes() == before
    assert versions(tiny.prefix)["vbtiny"] == "1.0"
    assert not (tiny.prefix / ".verl-bootstrap" / "updates").exists()


def test_yes_applies_it_as_a_locked_install_and_everything_agrees(tiny: Tiny) -> None:
    applied = invoke(["update", "--prefix", str(tiny.prefix), "--yes"])
    assert applied.code == EXIT_OK, applied.err
    assert "vbtiny: 1.0 → 1.1" in applied.err
    assert versions(tiny.prefix)["vbtiny"] == "1.1"
    options = state(tiny.prefix)["record"]["options"]
    assert options["locked"] is True
    fresh = read_lockfile(Path(options["lockfile"]))
    env_lock = read_lockfile(tiny.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml")
    assert fresh.distributions()["vbtiny"].version == "1.1"
    assert env_lock.distributions()["vbtiny"].version == "1.1"
    assert env_lock.distributions()["vbtiny"].hashes == fresh.distributions()["vbtiny"].hashes
    lockfile = str(tiny.prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml")
    against = invoke(["verify", "--prefix", str(tiny.prefix), "--against", lockfile])
    assert against.code == EXIT_OK, against.out + against.err
    checks = invoke(["verify", "--prefix", str(tiny.prefix)])  # the recorded profile's checks
    assert checks.code == EXIT_OK, checks.out + checks.err
    again = invoke(["update", "--prefix", str(tiny.prefix)])
    assert again.code == EXIT_OK and "is up to date" in again.out
    resumed = invoke(["--prefix", str(tiny.prefix)])  # the record resumes the updated env as is
    assert resumed.code == EXIT_OK, resumed.err
    assert "this run changes" not in resumed.err
    assert versions(tiny.prefix)["vbtiny"] == "1.1"


def test_an_env_without_a_record_cannot_be_updated(tmp_path: Path) -> None:
    refused = invoke(["update", "--prefix", str(tmp_path)])
    assert refused.code == 2
    assert "holds no record of how it was made" in refused.err
