"""No credential is written to a file or printed, whatever its shape: one rule (redact.py) for
every sink that writes or prints a URL a user gave.

The shapes: a URL's `user:password@`, query parameters named like a secret (`?token=`,
`?private_token=`, signed URLs' `sig`/`auth`/`X-Amz-Signature`/`X-Amz-Credential`), tokens known
by their shape. Where a file must still work (a lockfile's regenerate line, a requirements
file), the login is dropped and the netrc supplies it when the file is used.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from labfixtures import write_yaml

from verl_bootstrap import cli
from verl_bootstrap.cli.output import emit_json, err, out
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.artifact import Artifact
from verl_bootstrap.installer.resolve import Target
from verl_bootstrap.lab.onboard import onboarding_script
from verl_bootstrap.lock.export.common import ExportEntry
from verl_bootstrap.lock.export.pylock import render_pylock
from verl_bootstrap.lock.export.requirements import write_requirements
from verl_bootstrap.lock.io import dump_lockfile, read_lockfile
from verl_bootstrap.lock.making.create import LockRequest, _regenerate
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import RunOptions
from verl_bootstrap.profile.load import load_profile
from verl_bootstrap.redact import secrets_in, shareable
from verl_bootstrap.siteconfig import load_site

REPO = Path(__file__).resolve().parents[1]
SECRET = "s3cretPW9"  # every credential below holds it
LOCK = read_lockfile(REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml")


def test_the_regenerate_line_drops_a_channels_login_and_masks_its_token(tmp_path: Path) -> None:
    channels = (f"https://alice:{SECRET}@conda.lab/main", f"https://conda.lab/x?token={SECRET}")
    options = RunOptions(profile="cpu", prefix=tmp_path, channels=channels)
    target = Target(python="3.12", platform="linux-64", exclude_newer="2026-12-01T00:00:00Z")
    line = _regenerate(load_profile("cpu"), "cpu", target, LockRequest(options=options))
    assert SECRET not in line
    assert "--channel https://conda.lab/main" in line  # the netrc gives conda.lab's login
    assert "--channel 'https://conda.lab/x?token=***'" in line


def test_a_lockfile_is_written_without_credentials_in_its_header_or_body() -> None:
    repo = f"https://alice:{SECRET}@git.lab/verl.git"
    lock = LOCK.model_copy(
        update={
            "regenerate": f"verl-bootstrap lock --channel https://bob:{SECRET}@c.lab/main",
            "verl": LOCK.verl.model_copy(update={"repo": repo}),
        }
    )
    text = dump_lockfile(lock)
    assert SECRET not in text
    assert yaml.safe_load(text)["verl"]["repo"] == "https://***@git.lab/verl.git"


def test_a_requirements_export_holds_no_index_credential(tmp_path: Path) -> None:
    settings = IndexSettings(
        index_url=f"https://lab.invalid/simple?token={SECRET}",  # as PIP_INDEX_URL gives it
        named={"default": f"http://user:{SECRET}@mirror.invalid/simple"},
        extra_index_urls=(f"http://user:{SECRET}@extra.invalid/simple",),
        find_links=(f"https://files.invalid/wheels/?X-Amz-Signature={SECRET}",),
    )
    written = write_requirements(LOCK, [], settings, tmp_path)
    text = "".join(p.read_text() for p in written)
    assert written and SECRET not in text
    assert "\n--extra-index-url http://extra.invalid/simple\n" in text  # login from the netrc
    live = [line for line in text.splitlines() if line.startswith("--")]
    assert not any("***" in line for line in live)  # a masked URL is never a live line
    assert "# --index-url https://lab.invalid/simple?token=*** holds a credential" in text
    assert "give it to pip in PIP_INDEX_URL" in text


def test_a_pylock_export_names_artifacts_without_the_indexs_login() -> None:
    dist = LOCK.stages[0].distributions[0]
    url = f"https://user:{SECRET}@mirror.invalid/packages/x-1.0-py3-none-any.whl"
    entry = ExportEntry("deps", dist, (Artifact(url=url, sha256="0" * 64, kind="wheel"),))
    text = render_pylock(LOCK, [entry])
    assert SECRET not in text and '"https://mirror.invalid/packages/x-1.0-py3-none-any.whl"' in text


@pytest.mark.parametrize(
    "url",
    [
        f"https://gitlab.lab/api/v4/projects/1/packages/pypi/simple?private_token={SECRET}",
        f"https://files.lab/simple/?auth={SECRET}&sig={SECRET}",
        f"https://s3.lab/bucket/simple/?X-Amz-Credential={SECRET}&X-Amz-Signature={SECRET}",
        f"https://mirror.lab/simple/?access_token={SECRET}",
        f"https://u:{SECRET}@mirror.lab/simple",
    ],
)
def test_an_emitted_onboarding_script_refuses_every_credential_shape(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = write_yaml(
        tmp_path / "lab.yaml", {"schema_version": 1, "mirrors": {"pypi": {"index_url": url}}}
    )
    with pytest.raises(InputError, match="holds a credential"):
        onboarding_script(load_site(str(config)), config="https://lab/config.yaml", tool="t")


def test_an_onboarding_script_keeps_a_credential_written_as_a_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LAB_TOKEN", SECRET)
    url = "https://mirror.lab/simple/?private_token=${LAB_TOKEN}"
    config = write_yaml(
        tmp_path / "lab.yaml", {"schema_version": 1, "mirrors": {"pypi": {"index_url": url}}}
    )
    script = onboarding_script(load_site(str(config)), config="lab.yaml", tool="t")
    assert "${LAB_TOKEN}" in script and SECRET not in script


@pytest.mark.parametrize("command", ["list", "check"])
def test_wheelhouse_text_output_shows_no_login(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    house = f"http://user:{SECRET}@127.0.0.1:9/wheelhouse"  # nothing answers on port 9
    cli.main(["wheelhouse", command, "--wheelhouse", house])
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    assert "wheelhouse http://***@127.0.0.1:9/wheelhouse: 0 wheel(s)" in captured.out


def test_the_one_rule_finds_each_shape_and_shareable_masks_what_a_netrc_cannot_give() -> None:
    text = f"https://u:{SECRET}@h/x?sig={SECRET}&Authorization: Bearer {SECRET} hf_{'a' * 24}"
    assert secrets_in(text)[:3] == [SECRET, SECRET, SECRET]
    assert shareable(f"git+https://u:{SECRET}@h/r.git?token={SECRET}") == (
        "git+https://h/r.git?token=***"
    )
    assert shareable(f"ssh://git:{SECRET}@h/r.git") == "ssh://***@h/r.git"


def test_a_batch_script_drops_a_config_urls_login_and_refuses_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["cluster", "script", "--slurm", "--nodes", "2", "--action", "install"]
    base += ["--prefix", "/shared/verl", "--profile", "cpu", "--tool", "/shared/bin/vb"]
    target = tmp_path / "install.sbatch"
    config = f"https://alice:{SECRET}@lab.invalid/lab.yaml"
    assert cli.main([*base, "--config", config, "-o", str(target)]) == 0
    text = target.read_text()
    assert SECRET not in text and "--config https://lab.invalid/lab.yaml" in text
    capsys.readouterr()
    token = f"https://lab.invalid/lab.yaml?token={SECRET}"
    assert cli.main([*base, "--config", token]) == 2
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err and "holds a credential" in captured.err


def test_the_printing_layer_masks_what_a_caller_forgot_and_keeps_variable_references(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out(f"fetching https://u:{SECRET}@h/simple?sig={SECRET}")
    err(f"Authorization: Bearer {SECRET}")
    emit_json({"url": f"https://h/x?X-Amz-Signature={SECRET}"})
    out("https://lab:${LAB_TOKEN}@h/simple?private_token=${LAB_TOKEN}")
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    assert "https://***@h/simple?sig=***" in captured.out
    assert "https://lab:${LAB_TOKEN}@h/simple?private_token=${LAB_TOKEN}" in captured.out
