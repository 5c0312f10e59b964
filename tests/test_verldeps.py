"""The verl-deps stage for real: verl's extra comes from its editable install's metadata, verl
is not built a second time, and the stage fails when verl is no longer its checkout."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from scaffold import run_cli
from tinyenv import HOST_XY, publish_wheel, standin_verl

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.installer.cmdline import uv_binary
from verl_bootstrap.installer.envs.inventory import installed
from verl_bootstrap.run.steps.verldeps import editable_verl, verl_pin

PROFILE = """schema_version: 1
name: tiny-deps
python: {{requires: ">=3.10,<3.14", prefer: "{python}"}}
env: {{backend: venv}}
cuda_variants:
  cpu: {{description: no CUDA}}
stages:
  - id: verl-deps
    kind: verl-deps
    extras: [tiny]
verify: {{imports: [vbtiny], gpu_smoke: false, bf16: false}}
disk_gb: 0.1
"""


@dataclass(frozen=True)
class Env:
    prefix: Path
    links: Path
    logs: Path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = tmp_path_factory.mktemp("verldeps")
    links = root / "links"
    publish_wheel(links, "vbtiny", "1.0")
    repo = standin_verl(root / "verl", extras='tiny = ["vbtiny"]\n')
    profile = root / "tiny-deps.yaml"
    profile.write_text(PROFILE.format(python=HOST_XY), encoding="utf-8")
    prefix = root / "env"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_FIND_LINKS", str(links))
        made = run_cli(
            [
                "--profile",
                str(profile),
                "--prefix",
                str(prefix),
                "--verl-source",
                str(repo),
                "--cuda",
                "cpu",
                "--json",
            ]
        )
    assert made.code == 0, made.stderr
    return Env(prefix, links, Path(made.body["log_dir"]))


def test_the_extra_is_installed_and_verl_stays_its_editable_checkout(env: Env) -> None:
    checkout, dists = env.prefix / "src" / "verl", installed(env.prefix)
    editable_verl(dists, env.prefix, checkout)  # raises if verl is not the checkout
    assert verl_pin(dists, env.prefix, checkout) == "verl==0.9.1"
    assert list((env.prefix / "lib").glob("python3*/site-packages/vbtiny/__init__.py"))
    pins = (env.prefix / ".verl-bootstrap" / "protected" / "verl-deps.txt").read_text()
    assert "verl==0.9.1" in pins.splitlines()


def test_verl_is_built_once_by_install_verl_and_not_again(env: Env) -> None:
    built = "Built verl @ file://"
    assert built in (env.logs / "install-verl.log").read_text()
    deps = (env.logs / "verl-deps.log").read_text()
    assert "'verl[tiny]'" in deps or " verl[tiny]" in deps
    assert built not in deps
    assert "+ vbtiny==1.0" in deps


def test_a_verl_that_is_not_the_checkout_fails_the_check(
    env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = tmp_path_factory.mktemp("other")
    publish_wheel(other, "verl", "0.9.1")
    python = str(env.prefix / "bin" / "python")
    subprocess.run(
        [
            uv_binary(),
            "pip",
            "install",
            "--python",
            python,
            "--no-deps",
            "--reinstall",
            "--no-index",
            "--find-links",
            str(other),
            "verl==0.9.1",
        ],
        check=True,
        capture_output=True,
    )
    with pytest.raises(StepFailed) as failed:
        editable_verl(installed(env.prefix), env.prefix, env.prefix / "src" / "verl")
    assert "verl 0.9.1" in failed.value.message
    assert "not an editable install" in failed.value.message
    assert "install-verl" in (failed.value.hint or "")
