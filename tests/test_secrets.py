"""Secrets in index or git URLs never reach logs, JSON output, state, lockfiles or scripts.

Real installs against the lab's mirror host, whose index and git mirror need the token in the
URL: the cpu env built through the site config (credentials in the rewritten git URL and the
index), and a small env whose verl URL is given with the token on the command line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from labfixtures import TOKEN, clean_environ, lab, lab_config, lab_env, write_yaml
from scaffold import TOOL

from verl_bootstrap import cli
from verl_bootstrap.errors import InputError
from verl_bootstrap.lab.onboard import onboarding_script
from verl_bootstrap.siteconfig import load_site

pytestmark = pytest.mark.timeout(600)


def _leaks(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]


def test_the_site_config_install_leaks_no_token() -> None:
    env = lab_env()
    assert env.returncode == 0, env.stderr[-2000:]
    assert TOKEN not in env.stdout and TOKEN not in env.stderr
    state = env.prefix / ".verl-bootstrap"
    assert (state / "verl-bootstrap.lock.yaml").is_file() and (state / "state.json").is_file()
    assert _leaks(state) == []
    assert TOKEN not in (env.prefix / "src" / "verl" / ".git" / "config").read_text()


QUICK_PROFILE = {
    "schema_version": 1,
    "name": "quick",
    "description": "verl alone, to exercise a whole run in seconds",
    "env": {"backend": "venv"},
    "cuda_variants": {"cpu": {"description": "no CUDA"}},
    "stages": [],
    "verify": {"imports": [], "gpu_smoke": False},
    "disk_gb": 0.1,  # verl without its dependencies: a few MB
}


def test_a_token_in_the_verl_url_and_the_index_never_reaches_disk_or_output(
    tmp_path: Path,
) -> None:
    the_lab = lab()
    profile = write_yaml(tmp_path / "quick.yaml", QUICK_PROFILE)
    config = write_yaml(tmp_path / "lab.yaml", lab_config(the_lab))
    prefix = tmp_path / "env"
    argv = [str(TOOL), "install", "--config", str(config), "--profile", str(profile)]
    argv += ["--prefix", str(prefix), "--json", "--verl-source"]
    argv.append(the_lab.url("git/verl.git", token=TOKEN))
    done = subprocess.run(
        argv, env=clean_environ(), capture_output=True, text=True, timeout=300, check=False
    )
    assert TOKEN not in done.stdout and TOKEN not in done.stderr
    # verl alone fails `uv pip check` (its deps are missing): every other step ran and wrote
    statuses = {s["id"]: s["status"] for s in json.loads(done.stdout)["steps"]}
    assert statuses["fetch-source"] == statuses["record-lock"] == "done", done.stderr[-2000:]
    assert _leaks(prefix / ".verl-bootstrap") == []
    lock = yaml.safe_load((prefix / ".verl-bootstrap" / "verl-bootstrap.lock.yaml").read_text())
    assert lock["verl"]["repo"].startswith("http://127.0.0.1:")  # the netrc gives the login


def test_plan_json_and_errors_redact_credentials(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"https://user:{TOKEN}@git.invalid/verl.git"
    code = cli.main(
        [
            "plan",
            "--profile",
            "cpu",
            "--verl-source",
            url,
            "--json",
            "--index",
            f"pytorch-cpu=https://u:{TOKEN}@m.invalid/cpu",
            "--python",
            "/usr/bin/python3",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert TOKEN not in captured.out + captured.err
    assert "https://***@git.invalid/verl.git" in captured.out


def test_an_emitted_script_refuses_a_literal_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    data = {"schema_version": 1, "mirrors": {"pypi": {"index_url": f"https://u:{TOKEN}@m/simple"}}}
    config = write_yaml(tmp_path / "lab.yaml", data)
    with pytest.raises(InputError, match="credential"):
        onboarding_script(load_site(str(config)), config="https://lab/config.yaml", tool="t")
