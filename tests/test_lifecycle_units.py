"""The lifecycle's safety rules on real git checkouts and real shells, without an install.

fetch-source moves a checkout only when the tool made it and nobody touched it; the record's
masked credentials are asked for again; completion loads in each shell and completes profiles.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from labmirror import git_mirror, serving
from shells import shell_path
from verlrepo import git

from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.installer.cmdline import pip_launcher
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.run.state.resume import merge_indexes, merge_options
from verl_bootstrap.source.fetch import fetch_source
from verl_bootstrap.source.sourcework import checkout_work
from verl_bootstrap.source.spec import SourceSpec

BIN = Path(sys.executable).parent  # the dev venv, where verl-bootstrap is installed


def spec(repo: Path, ref: str, checkout: Path) -> SourceSpec:
    return SourceSpec(repo=repo.as_uri(), ref=ref, checkout=checkout, sdist_fallback=False)


def fetch(repo: Path, ref: str, checkout: Path, log: Path) -> str:
    result = fetch_source(
        spec(repo, ref, checkout), IndexSettings(), pip=pip_launcher(), log_path=log
    )
    assert result.ref == ref
    return str(result.commit)


def test_a_checkout_the_tool_made_moves_to_the_new_ref_and_back(
    tmp_path: Path, verl_two_releases: Path
) -> None:
    checkout, log = tmp_path / "src" / "verl", tmp_path / "fetch.log"
    assert fetch(verl_two_releases, "v0.9.1", checkout, log) == git(
        verl_two_releases, "rev-parse", "v0.9.1"
    )
    v090 = git(verl_two_releases, "rev-parse", "v0.9.0")
    assert fetch(verl_two_releases, "v0.9.0", checkout, log) == v090  # fetched into the clone
    assert git(checkout, "rev-parse", "HEAD") == v090
    assert fetch(verl_two_releases, "v0.9.1", checkout, log) != v090


def test_a_checkout_the_user_moved_or_edited_is_never_moved(
    tmp_path: Path, verl_two_releases: Path
) -> None:
    checkout, log = tmp_path / "src" / "verl", tmp_path / "fetch.log"
    fetch(verl_two_releases, "v0.9.1", checkout, log)
    (checkout / "setup.py").write_text("# my edit\n", encoding="utf-8")
    with pytest.raises(InputError, match="has local changes"):
        fetch(verl_two_releases, "v0.9.0", checkout, log)
    git(checkout, "checkout", "-q", "setup.py")
    git(checkout, "fetch", "-q", "--depth", "1", "origin", "v0.9.0")
    git(checkout, "checkout", "-q", "--detach", "FETCH_HEAD")  # the user moved it themselves
    with pytest.raises(InputError, match="not left there by verl-bootstrap") as raised:
        fetch(verl_two_releases, "v0.9.1", checkout, log)
    assert f"git -C {checkout} checkout v0.9.1" in (raised.value.hint or "")
    assert git(checkout, "rev-parse", "HEAD") == git(verl_two_releases, "rev-parse", "v0.9.0")


def test_an_unknown_ref_fails_instead_of_reusing_the_checkout(
    tmp_path: Path, verl_two_releases: Path
) -> None:
    checkout, log = tmp_path / "src" / "verl", tmp_path / "fetch.log"
    head = fetch(verl_two_releases, "v0.9.1", checkout, log)
    with pytest.raises(StepFailed, match=r"could not get verl ref 'v9\.9\.9'"):
        fetch(verl_two_releases, "v9.9.9", checkout, log)
    assert git(checkout, "rev-parse", "HEAD") == head


def test_a_ref_the_clone_lacks_comes_from_verls_url_with_its_login_and_is_logged(
    tmp_path: Path, verl_two_releases: Path
) -> None:
    """verl from a lab's mirror behind a login: the checkout's origin holds no login (it never
    goes into .git/config), so a ref the clone lacks is fetched from verl's URL, the login
    reaching git as the clone's did, and the run's log shows the fetch and the checkout, the
    login masked. (Fetched from `origin`, the mirror refused it: 401.)"""
    checkout, log = tmp_path / "src" / "verl", tmp_path / "fetch.log"
    token = "s3cret-lab-token"
    git_mirror(verl_two_releases, tmp_path / "git" / "verl.git")
    with serving(wheels=(), git_root=tmp_path / "git", site=tmp_path, token=token) as server:
        url = server.url("/git/verl.git")
        for ref in ("v0.9.1", "v0.9.0"):
            settings = IndexSettings()
            got = fetch_source(
                SourceSpec(url, ref, checkout, False), settings, pip=[], log_path=log
            )
    assert got.commit == git(verl_two_releases, "rev-parse", "v0.9.0")
    assert git(checkout, "rev-parse", "HEAD") == got.commit
    said = log.read_text(encoding="utf-8")
    masked = url.replace(f"lab:{token}@", "***@")
    assert f"$ git fetch --quiet --depth 1 -- '{masked}' v0.9.0\n[exit 0]" in said
    assert f"$ git checkout --quiet --detach {got.commit}" in said
    assert token not in said + (checkout / ".git" / "config").read_text(encoding="utf-8")


def test_a_ref_that_reads_as_an_option_to_git_runs_nothing(
    tmp_path: Path, verl_two_releases: Path
) -> None:
    """A ref from a profile is untrusted: one such as `--upload-pack=CMD` is a name git does not
    find, never an option of the fetch (which would run CMD)."""
    checkout, log = tmp_path / "src" / "verl", tmp_path / "fetch.log"
    head = fetch(verl_two_releases, "v0.9.1", checkout, log)
    ran = tmp_path / "ran"
    with pytest.raises(StepFailed, match="could not get verl ref"):
        fetch(verl_two_releases, f"--upload-pack=touch {ran};", checkout, log)
    assert not ran.exists()
    assert git(checkout, "rev-parse", "HEAD") == head


def test_a_file_name_that_is_not_utf8_is_listed_as_the_users_work(
    tmp_path: Path, verl_two_releases: Path
) -> None:
    """git lists file names as bytes: one in another encoding (a Latin-1 name from an old
    script) is named, its odd byte escaped, instead of stopping `remove` with a crash."""
    checkout, log = tmp_path / "src" / "verl", tmp_path / "fetch.log"
    fetch(verl_two_releases, "v0.9.1", checkout, log)
    (checkout / os.fsdecode(b"r\xe9sultats.txt")).write_text("mine\n", encoding="utf-8")
    assert checkout_work(checkout) == ["r\\xe9sultats.txt (untracked)"]


def test_masked_credentials_in_the_record_are_asked_for_again() -> None:
    recorded = {"verl_source": "https://***@git.example.invalid/verl.git", "cuda": "cpu"}
    with pytest.raises(InputError, match=r"--verl-source .* held credentials"):
        merge_options({}, recorded)
    given = {"verl_source": "https://tok@git.example.invalid/verl.git"}
    assert merge_options(given, recorded)["verl_source"] == given["verl_source"]
    assert merge_options(given, recorded)["cuda"] == "cpu"
    masked = [["lab", "https://***@pypi.example.invalid/simple"]]
    with pytest.raises(InputError, match=r"index\(es\) lab held credentials") as raised:
        merge_indexes({}, masked, {})
    assert raised.value.hint == "--index lab=URL: pass them again"
    site = {"lab": "https://tok@pypi.example.invalid/simple"}
    assert merge_indexes(site, masked, {}) == site
    with pytest.raises(InputError, match=r"record\.options\.indexes"):
        merge_indexes({}, [["only-a-name"]], {})


def _shell(shell: str, script: str) -> str:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(Path.home())}
    done = subprocess.run(
        [shell_path(shell), "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_fish_loads_the_completion_and_completes_a_profile_name() -> None:
    script = (
        'verl-bootstrap completion --shell fish | source; complete -C "verl-bootstrap --profile c"'
    )
    assert _shell("fish", script).split("\t")[0] == "cpu"


def test_zsh_loads_the_completion_and_its_protocol_completes_a_profile_name() -> None:
    loaded = _shell(
        "zsh",
        "autoload -U compinit && compinit -u\n"
        'eval "$(verl-bootstrap completion --shell zsh)"\nwhence -w _python_argcomplete',
    )
    assert loaded.strip() == "_python_argcomplete: function"
    # what the loaded function runs on Tab (zsh itself needs a terminal to press it)
    asked = _shell(
        "zsh",
        '_ARGCOMPLETE=1 _ARGCOMPLETE_SHELL=zsh COMP_LINE="verl-bootstrap '
        '--profile c" COMP_POINT=26 verl-bootstrap 8>&1 9>&2 1>/dev/null 2>&1',
    )
    assert asked.startswith("cpu")


def test_help_does_not_import_the_completion_library() -> None:
    code = (
        "import sys; from verl_bootstrap import cli\ntry:\n    cli.main(['--help'])\n"
        "except SystemExit:\n    pass\nprint('argcomplete' in sys.modules)"
    )
    done = subprocess.run(
        [str(BIN / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().endswith("False")


def test_a_state_with_a_wrong_record_type_is_named_not_crashed_on(tmp_path: Path) -> None:
    from verl_bootstrap.run.state.state import State  # noqa: PLC0415

    path = tmp_path / "state.json"
    path.write_text('{"version": 1, "steps": {}, "made": "bin"}', encoding="utf-8")
    with pytest.raises(InputError, match=r"invalid state: made: Input should be a valid list"):
        State.load(path)
    path.write_text('{"version": 1, "steps": {}, "made": ["bin", "../home"]}', encoding="utf-8")
    with pytest.raises(InputError, match=r"list of names inside the prefix"):
        State.load(path)  # `remove` would otherwise delete outside the prefix


def test_completion_offers_exactly_the_shipped_profiles() -> None:
    from verl_bootstrap.cli.shellcomplete import _profiles  # noqa: PLC0415
    from verl_bootstrap.profile import list_profiles  # noqa: PLC0415

    assert list(_profiles()) == list_profiles()
