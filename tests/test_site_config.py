"""Site config: discovery order, strict validation, merging with provenance, and translation."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from verl_bootstrap import cli
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.condarc import channel_urls, load_condarc
from verl_bootstrap.machine.host.indexes import IndexSettings
from verl_bootstrap.options import SiteOptions
from verl_bootstrap.siteconfig import (
    backend_environment,
    condarc_text,
    load_site,
    site_options,
)
from verl_bootstrap.siteconfig.apply import (
    applied_environment,
    apply_site_indexes,
    pytorch_mirrors,
)


def write(path: Path, data: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"schema_version": 1, **data}), encoding="utf-8")
    return path


@pytest.fixture
def layers(tmp_path: Path) -> dict[str, Path]:
    """A system file, a user file, a $VERL_BOOTSTRAP_CONFIG file and a --config file."""
    home = tmp_path / "home"
    return {
        "home": home,
        "system": write(
            tmp_path / "etc" / "config.yaml",
            {"caches": {"uv": "/sys-cache"}, "defaults": {"profile": "fsdp"}},
        ),
        "user": write(
            home / ".config" / "verl-bootstrap" / "config.yaml",
            {"caches": {"uv": "/user-cache"}, "mirrors": {"indexes": {"a": "https://a.example/s"}}},
        ),
        "env": write(tmp_path / "env.yaml", {"mirrors": {"indexes": {"b": "https://b.example/s"}}}),
        "cli": write(tmp_path / "cli.yaml", {"defaults": {"profile": "cpu"}}),
    }


def test_later_files_override_earlier_ones_and_each_setting_names_its_file(
    layers: dict[str, Path],
) -> None:
    environ = {"VERL_BOOTSTRAP_CONFIG": str(layers["env"])}
    site = load_site(str(layers["cli"]), environ, home=layers["home"], system=layers["system"])
    assert [s.label for s in site.used] == ["system", "user", "$VERL_BOOTSTRAP_CONFIG", "--config"]
    assert site.config.caches.uv == "/user-cache"
    assert site.config.defaults.profile == "cpu"
    assert site.config.mirrors.indexes == {"a": "https://a.example/s", "b": "https://b.example/s"}
    assert site.origins[("caches", "uv")].startswith("user ")
    assert site.origins[("defaults", "profile")].startswith("--config ")
    assert site.origins[("mirrors", "indexes", "b")].startswith("$VERL_BOOTSTRAP_CONFIG ")


def test_no_config_anywhere_gives_an_empty_config(tmp_path: Path) -> None:
    site = load_site(None, {}, home=tmp_path, system=tmp_path / "none.yaml")
    assert site.used == ()
    assert site.config.defaults.profile is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mirrors": {"pypi": {"index_urls": "x"}}}, "index_urls"),
        ({"mirrors": {"pytorch": {"cuda12": "https://m/"}}}, "not a CUDA variant"),
        ({"mirrors": {"indexes": {"default": "https://m/"}}}, "mirrors.pypi.index_url"),
        ({"network": {"proxy": {"https": "ftp://p:1"}}}, "not a URL"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_files_are_refused_naming_file_and_field(
    tmp_path: Path, data: dict[str, object], message: str
) -> None:
    path = write(tmp_path / "bad.yaml", data)
    with pytest.raises(InputError, match=message) as info:
        load_site(str(path), {}, home=tmp_path, system=tmp_path / "none.yaml")
    assert str(path) in info.value.message


def test_schema_version_is_required(tmp_path: Path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("mirrors: {}\n")
    with pytest.raises(InputError, match="schema_version"):
        load_site(str(path), {}, home=tmp_path, system=tmp_path / "none.yaml")


def test_variables_and_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "lab" / "wheels").mkdir(parents=True)
    path = write(
        tmp_path / "lab" / "site.yaml",
        {
            "mirrors": {
                "pypi": {
                    "index_url": "https://u:${TOKEN}@m.example/simple",
                    "find_links": ["wheels"],
                },
                "indexes": {"local": "wheels"},
            },
            "caches": {"uv": "~/uv"},
        },
    )
    environ = {"TOKEN": "t0k", "HOME": str(tmp_path)}
    site = load_site(str(path), environ, home=tmp_path, system=tmp_path / "none.yaml")
    assert site.config.mirrors.pypi.index_url == "https://u:t0k@m.example/simple"
    assert site.config.mirrors.pypi.find_links == (str(tmp_path / "lab" / "wheels"),)
    assert site.config.mirrors.indexes["local"] == (tmp_path / "lab" / "wheels").as_uri()
    assert site.raw["mirrors"]["pypi"]["index_url"].endswith("${TOKEN}@m.example/simple")


def test_an_unset_variable_is_named(tmp_path: Path) -> None:
    path = write(tmp_path / "s.yaml", {"mirrors": {"pypi": {"index_url": "https://${NOPE}/s"}}})
    with pytest.raises(InputError, match=r"\$\{NOPE\}"):
        load_site(str(path), {}, home=tmp_path, system=tmp_path / "none.yaml")


def _config(tmp_path: Path, **data: object) -> object:
    path = write(tmp_path / "c.yaml", dict(data))
    return load_site(str(path), {}, home=tmp_path, system=tmp_path / "none.yaml").config


def test_one_mirrors_block_becomes_every_backends_settings(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("pem")
    config = _config(
        tmp_path,
        mirrors={
            "git": {"https://github.com/": "https://git.lab/gh/"},
            "conda": {
                "channel_alias": "https://conda.lab/",
                "custom_channels": {"nvidia": "https://nv.lab/"},
            },
        },
        network={
            "proxy": {"https": "http://proxy:3128", "no_proxy": ["lab", "10.0.0.0/8"]},
            "ca_bundle": str(bundle),
        },
        caches={"uv": "/c/uv", "conda": "/c/conda"},
    )
    env = backend_environment(config, {"GIT_CONFIG_COUNT": "1"})  # type: ignore[arg-type]
    assert env["GIT_CONFIG_COUNT"] == "2"  # appended after the one already set
    assert env["GIT_CONFIG_KEY_1"] == "url.https://git.lab/gh/.insteadOf"
    assert env["GIT_CONFIG_VALUE_1"] == "https://github.com/"
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://proxy:3128"
    assert env["NO_PROXY"] == "lab,10.0.0.0/8"
    assert env["SSL_CERT_FILE"] == env["PIP_CERT"] == env["GIT_SSL_CAINFO"] == str(bundle)
    assert env["UV_CACHE_DIR"] == "/c/uv"
    assert env["CONDA_PKGS_DIRS"] == "/c/conda/conda-pkgs"
    rc = yaml.safe_load(condarc_text(config.mirrors.conda) or "")  # type: ignore[attr-defined]
    assert rc == {
        "channel_alias": "https://conda.lab/",
        "custom_channels": {"nvidia": "https://nv.lab/"},
    }


def test_the_condarc_is_read_by_the_conda_backend(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.yaml",
        {
            "mirrors": {
                "conda": {
                    "channel_alias": "https://conda.lab",
                    "custom_channels": {"nvidia": "https://nv.lab"},
                }
            }
        },
    )
    site = load_site(str(path), {}, home=tmp_path, system=tmp_path / "none.yaml")
    options = site_options(site, {"HOME": str(tmp_path)})
    environ = dict(options.environment)
    settings = load_condarc({"CONDARC": str(environ["CONDARC"])}, home=tmp_path / "nohome")
    assert channel_urls(["conda-forge", "nvidia"], settings) == (
        "https://conda.lab/conda-forge",
        "https://nv.lab/nvidia",
    )


def test_a_git_rewrite_reaches_a_real_git_clone(tmp_path: Path, verl_repo_session: Path) -> None:
    config = _config(
        tmp_path,
        mirrors={
            "git": {"https://github.com/verl-project/": verl_repo_session.parent.as_uri() + "/"}
        },
    )
    env = {k: v for k, v in backend_environment(config, {}).items() if v is not None}  # type: ignore[arg-type]
    with applied_environment(env):
        done = subprocess.run(
            [
                "git",
                "ls-remote",
                f"https://github.com/verl-project/{verl_repo_session.name}",
                "v0.9.1",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    assert done.returncode == 0, done.stderr
    assert "refs/tags/v0.9.1" in done.stdout


def test_site_indexes_replace_pips_and_mirror_pytorch_by_variant() -> None:
    pip = IndexSettings(index_url="https://index.example/simple", find_links=("/opt/wheels",))
    site = SiteOptions(
        index_url="https://lab/simple",
        pytorch=(("cpu", "https://lab/torch-cpu"),),
        origin="--config x",
    )
    merged = apply_site_indexes(pip, site)
    assert merged.index_url == "https://lab/simple"
    assert merged.find_links == ("/opt/wheels",)  # not set by the site: pip's stays
    assert merged.sources["index-url"] == "--config x"
    named = {"pytorch-cpu": "https://download.pytorch.org/whl/cpu", "other": "https://x/simple"}
    assert pytorch_mirrors(named, site) == {"pytorch-cpu": "https://lab/torch-cpu"}


def test_ambient_uv_index_variables_are_cleared_when_the_site_sets_the_index(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, mirrors={"pypi": {"index_url": "https://lab/simple"}})
    env = backend_environment(config, {"UV_DEFAULT_INDEX": "https://elsewhere/simple"})  # type: ignore[arg-type]
    assert env["UV_DEFAULT_INDEX"] is None


def test_applied_environment_restores_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VB_T1", "old")
    monkeypatch.delenv("VB_T2", raising=False)
    with applied_environment({"VB_T1": None, "VB_T2": "new"}):
        assert "VB_T1" not in os.environ
        assert os.environ["VB_T2"] == "new"
    assert os.environ["VB_T1"] == "old"
    assert "VB_T2" not in os.environ


def test_config_show_names_sources_and_redacts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LAB_TOKEN", "hunter2-secret")
    monkeypatch.delenv("VERL_BOOTSTRAP_CONFIG", raising=False)
    path = write(
        tmp_path / "lab.yaml",
        {
            "mirrors": {"pypi": {"index_url": "https://me:${LAB_TOKEN}@lab/simple"}},
            "network": {"proxy": {"https": "http://user:pw@proxy:3128"}},
        },
    )
    assert cli.main(["config", "show", "--config", str(path), "--json"]) == 0
    text = capsys.readouterr().out
    assert "hunter2-secret" not in text and "user:pw" not in text
    body = json.loads(text)
    assert set(body) == {"schema", "files", "settings", "index", "environment", "notes"}
    assert body["schema"] == "verl-bootstrap.config/1"
    row = next(s for s in body["settings"] if s["key"] == "mirrors.pypi.index_url")
    assert row == {
        "key": "mirrors.pypi.index_url",
        "value": "https://***@lab/simple",
        "source": f"--config {path}",
    }
    assert {"name": "HTTPS_PROXY", "value": "http://***@proxy:3128"}.items() <= next(
        e for e in body["environment"] if e["name"] == "HTTPS_PROXY"
    ).items()
    assert cli.main(["config", "show", "--config", str(path)]) == 0
    assert "[--config " in capsys.readouterr().out


def test_plan_takes_the_sites_defaults_and_the_cli_overrides_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("VERL_BOOTSTRAP_CONFIG", raising=False)
    path = write(
        tmp_path / "lab.yaml",
        {
            "mirrors": {
                "pypi": {"index_url": "https://lab.example/simple"},
                "pytorch": {"cpu": "https://lab.example/cpu"},
            },
            "defaults": {"profile": "cpu", "envs_dir": str(tmp_path / "envs")},
        },
    )
    argv = ["plan", "--config", str(path), "--json", "--python", "/usr/bin/python3"]
    assert cli.main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["profile"] == "cpu" and plan["prefix"] == str(tmp_path / "envs" / "cpu")
    torch = next(s for s in plan["steps"] if s["id"] == "torch")["commands"][0]
    assert torch[torch.index("--default-index") + 1] == "https://lab.example/simple"
    assert "https://lab.example/cpu" in torch
    assert cli.main([*argv, "--index", "default=https://cli.example/simple"]) == 0
    torch = next(s for s in json.loads(capsys.readouterr().out)["steps"] if s["id"] == "torch")[
        "commands"
    ][0]
    assert torch[torch.index("--default-index") + 1] == "https://cli.example/simple"
