"""What a lab mate's lockfile or site config may make a run do: a stage's env in a lockfile is a
known build variable of its shape that the profile's stage sets to the same value, or sizing,
never a loader, search path or proxy; what a lockfile sets is shown; plain http for a lab's
lockfiles, wheelhouse or a site config is refused unless a site config trusts the host. Real
lockfiles (the committed cpu lock, edited as a hostile lab mate would), real site configs, the
real CLI in a fresh process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from scaffold import run_tool, with_env

REPO = Path(__file__).resolve().parents[1]
CPU_LOCK = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The tool in a fresh process, `env` on top of this one's."""
    return run_tool(*args, env=with_env(**(env or {})))


def refused(*args: str | Path) -> dict[str, Any]:
    """`ARGS --json`, refused as bad input (exit 2): its error's data, the refusal's facts."""
    done = cli(*args, "--json")
    assert done.returncode == 2, done.stdout + done.stderr
    data: dict[str, Any] = json.loads(done.stdout)["error"]["data"]
    return data


def lab_lock(folder: Path, torch_env: dict[str, str], *, dist_env: bool = False) -> Path:
    """The committed cpu lock with `torch_env` on its torch stage (or, with `dist_env`, on the
    build env of the stage's first distribution), laid out as a lab's lockfiles folder."""
    body: dict[str, Any] = yaml.safe_load(CPU_LOCK.read_text())
    torch = next(s for s in body["stages"] if s["id"] == "torch")
    if dist_env:
        torch["distributions"][0]["build_env"] = torch_env
    else:
        torch["env"] = torch_env
    path = folder / "lab" / "cpu" / "cpu-linux-64.lock.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(body))
    return path


def site(folder: Path, **fields: object) -> Path:
    path = folder / "site.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, **fields}))
    return path


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LD_PRELOAD", "/tmp/evil.so"),
        ("LD_LIBRARY_PATH", "/tmp/evil"),
        ("PYTHONPATH", "/tmp/evil"),
        ("PYTHONSTARTUP", "/tmp/evil.py"),
        ("PATH", "/tmp/evil:/usr/bin"),
        ("https_proxy", "http://evil.example:3128"),
        ("UV_INDEX_URL", "https://evil.example/simple"),
        ("PIP_CONFIG_FILE", "/tmp/evil.conf"),
    ],
)
def test_a_lockfile_setting_a_loader_search_path_or_proxy_is_refused_at_read_time(
    tmp_path: Path, variable: str, value: str
) -> None:
    lock = lab_lock(tmp_path, {variable: value})
    prefix = tmp_path / "env"
    data = refused("--profile", "cpu", "--lockfile", lock, "--prefix", prefix)
    (field,) = data["fields"]
    assert (data["file"], field["field"]) == (str(lock), "stages.1.env")
    assert variable in field["problem"]  # the variable refused, named
    assert not prefix.exists()  # refused before anything was made


def test_a_build_env_of_a_locked_sdist_is_held_to_the_same_rule(tmp_path: Path) -> None:
    lock = lab_lock(tmp_path, {"LD_PRELOAD": "/tmp/evil.so"}, dist_env=True)
    (field,) = refused("plan", "--profile", "cpu", "--lockfile", lock)["fields"]
    assert field["field"] == "stages.1.distributions.0.build_env"
    assert "LD_PRELOAD" in field["problem"]


def test_a_lab_lockfile_with_ld_preload_is_never_the_route_and_the_plan_says_why(
    tmp_path: Path,
) -> None:
    lab_lock(tmp_path, {"LD_PRELOAD": "/tmp/evil.so"})
    config = site(tmp_path, lockfiles=str(tmp_path / "lab"))
    done = cli("plan", "--profile", "cpu", "--config", config)
    assert done.returncode == 0, done.stderr
    assert "from lockfile lockfiles/cpu/cpu-linux-64.lock.yaml" in done.stdout
    assert "not the lab's lockfile" in done.stdout and "LD_PRELOAD may not be set" in done.stdout
    assert "LD_PRELOAD=" not in done.stdout  # no step runs with it


def test_a_variable_neither_known_nor_the_profiles_is_refused_even_frozen(tmp_path: Path) -> None:
    lock = lab_lock(tmp_path, {"CC": "/tmp/evil-gcc"})
    for extra in ((), ("--frozen",)):
        data = refused("plan", "--profile", "cpu", "--lockfile", lock, *extra)
        assert data == {"file": str(lock), "stage": "torch", "variables": ["CC"], "profile": "cpu"}


def test_a_variable_the_profile_sets_to_the_same_value_is_taken(tmp_path: Path) -> None:
    profile: dict[str, Any] = yaml.safe_load((REPO / "profiles" / "cpu.yaml").read_text())
    profile["stages"][0]["env"] = {"CC": "gcc-12"}
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump(profile))
    lock = lab_lock(tmp_path, {"CC": "gcc-12"})
    done = cli("plan", "--profile", path, "--lockfile", lock, "--frozen")
    assert done.returncode == 0, done.stderr
    assert "the lockfile sets: CC=gcc-12" in done.stdout
    other = lab_lock(tmp_path, {"CC": "/tmp/evil-gcc"})  # the profile's name, another value
    data = refused("plan", "--profile", path, "--lockfile", other, "--frozen")
    assert (data["stage"], data["variables"]) == ("torch", ["CC"])


def test_a_known_build_variable_of_its_shape_is_taken_and_shown(tmp_path: Path) -> None:
    lock = lab_lock(tmp_path, {"MAX_JOBS": "2", "TORCH_CUDA_ARCH_LIST": "8.0;9.0+PTX"})
    done = cli("plan", "--profile", "cpu", "--lockfile", lock)
    assert done.returncode == 0, done.stderr
    assert "the lockfile sets: MAX_JOBS=2 TORCH_CUDA_ARCH_LIST='8.0;9.0+PTX'" in done.stdout


@pytest.mark.parametrize(
    ("variable", "value"),
    [("MAX_JOBS", "2; rm -rf ~"), ("TORCH_CUDA_ARCH_LIST", "9.0 $(id)"), ("NVTE_FRAMEWORK", "/x")],
)
def test_a_known_build_variable_of_another_shape_is_refused(
    tmp_path: Path, variable: str, value: str
) -> None:
    lock = lab_lock(tmp_path, {variable: value})
    (field,) = refused("plan", "--profile", "cpu", "--lockfile", lock)["fields"]
    assert field["field"] == "stages.1.env"
    assert variable in field["problem"]


def test_a_profile_may_not_set_a_loader_variable_on_a_stage(tmp_path: Path) -> None:
    profile: dict[str, Any] = yaml.safe_load((REPO / "profiles" / "cpu.yaml").read_text())
    profile["stages"][0]["env"] = {"LD_PRELOAD": "/tmp/evil.so"}
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump(profile))
    (field,) = refused("plan", "--profile", path)["fields"]
    assert (field["file"], field["field"]) == (str(path), "stages.0.env")
    assert "LD_PRELOAD" in field["problem"]


@pytest.mark.parametrize("field", ["lockfiles", "wheelhouse"])
def test_plain_http_for_a_labs_lockfiles_or_wheelhouse_is_refused_unless_trusted(
    tmp_path: Path, field: str
) -> None:
    url = "http://lab.invalid/share"
    refused = cli("plan", "--profile", "cpu", "--config", site(tmp_path, **{field: url}))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{field}: {url} is plain http to lab.invalid, which the site config does not" in (
        refused.stderr
    )
    trusted = site(tmp_path, **{field: url, "trusted_http_hosts": ["lab.invalid"]})
    done = cli("plan", "--profile", "cpu", "--config", trusted)
    assert done.returncode == 0, done.stderr  # the host is tried (and is not there)
    https = cli(
        "plan", "--profile", "cpu", "--config", site(tmp_path, **{field: "https://x.invalid/s"})
    )
    assert https.returncode == 0, https.stderr


def test_a_site_config_over_plain_http_needs_a_config_read_before_it_to_trust_the_host(
    tmp_path: Path,
) -> None:
    url = "http://lab.invalid/site.yaml"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    refused = cli("plan", "--profile", "cpu", "--config", url, env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"--config {url}: {url} is plain http to lab.invalid" in refused.stderr
    user = tmp_path / "xdg" / "verl-bootstrap" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(yaml.safe_dump({"schema_version": 1, "trusted_http_hosts": ["lab.invalid"]}))
    tried = cli("plan", "--profile", "cpu", "--config", url, "--json", env=env)
    assert json.loads(tried.stdout)["error"]["data"]["url"] == url, tried.stdout  # fetched


FSDP_LOCK = REPO / "lockfiles" / "fsdp" / "cu128-linux-64.lock.yaml"
OFFICIAL = (
    "https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3/"
    "flash_attn-2.8.3+cu12torch2.10cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
)


def fsdp_lock(folder: Path, url: str, **wheel: object) -> Path:
    """The committed fsdp cu128 lock whose flash-attn records a release kernel wheel at `url`."""
    body: dict[str, Any] = yaml.safe_load(FSDP_LOCK.read_text())
    stage = next(s for s in body["stages"] if s["id"] == "flash-attn")
    key = {"torch": "2.10.0", "cuda": "12.8", "cxx11abi": True, "python": "cp312"}
    stage["distributions"][0]["kernel_wheel"] = {
        "file": url.rsplit("/", 1)[-1].replace("+", "-") if "/" in url else "x.whl",
        "sha256": "a" * 64,
        "source": "release",
        "key": {**key, "platform": "linux_x86_64"},
        "url": url,
        **wheel,
    }
    path = folder / "fsdp.lock.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def fsdp_plan(lock: Path) -> subprocess.CompletedProcess[str]:
    return cli("plan", "--profile", "fsdp", "--cuda", "cu128", "--lockfile", lock)


def test_a_kernel_wheel_url_over_plain_http_is_refused_at_read_time(tmp_path: Path) -> None:
    lock = fsdp_lock(tmp_path, OFFICIAL.replace("https://", "http://"))
    data = refused("plan", "--profile", "fsdp", "--cuda", "cu128", "--lockfile", lock)
    assert data["file"] == str(lock)
    assert [f["field"] for f in data["fields"]] == ["stages.3.distributions.0.kernel_wheel.url"]


def test_a_kernel_wheel_url_from_no_declared_source_is_refused(tmp_path: Path) -> None:
    evil = "https://evil.example/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    lock = fsdp_lock(tmp_path, evil)
    data = refused("plan", "--profile", "fsdp", "--cuda", "cu128", "--lockfile", lock)
    assert data == {
        "file": str(lock),
        "stage": "flash-attn",
        "distribution": "flash-attn",
        "url": evil,
        "profile": "fsdp",
    }
    # the official releases' own path, a sibling repository on the same host: still not it
    sibling = fsdp_lock(tmp_path, OFFICIAL.replace("Dao-AILab/flash-attention", "evil/flash"))
    assert fsdp_plan(sibling).returncode == 2
    declared = fsdp_plan(fsdp_lock(tmp_path, OFFICIAL))
    assert declared.returncode == 0, declared.stderr


@pytest.mark.parametrize("outside", ["torch", "numpy"])
def test_a_whole_kernel_wheel_may_not_replace_another_stages_distribution(
    tmp_path: Path, outside: str
) -> None:
    lock = fsdp_lock(tmp_path, OFFICIAL, distribution="flash-attn", replaces=[outside])
    done = fsdp_plan(lock)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"flash-attn's kernel_wheel names {outside}, which stage flash-attn does not lock" in (
        done.stderr
    )


def flash_env_lock(folder: Path, env: dict[str, str], *, dist_env: bool = False) -> Path:
    """The committed fsdp cu128 lock whose flash-attn stage's env (or its sdist's build env)
    is `env`, as a lab mate would edit it."""
    body: dict[str, Any] = yaml.safe_load(FSDP_LOCK.read_text())
    stage = next(s for s in body["stages"] if s["id"] == "flash-attn")
    if dist_env:
        stage["distributions"][0]["build_env"] = env
    else:
        stage["env"] = env
    path = folder / "fsdp-env.lock.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.mark.parametrize(
    ("env", "refused_names"),
    [
        ({"FLASH_ATTENTION_FORCE_BUILD": "FALSE", "MAX_JOBS": "4"}, "FLASH_ATTENTION_FORCE_BUILD"),
        (
            {"FLASH_ATTENTION_FORCE_BUILD": "TRUE", "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE"},
            "FLASH_ATTENTION_SKIP_CUDA_BUILD",
        ),
        ({"USE_MEGATRON": "1"}, "USE_MEGATRON"),
    ],
)
@pytest.mark.parametrize("where", ["env", "build_env"])
def test_a_lockfile_cannot_switch_off_a_build_the_profile_forces(
    tmp_path: Path, env: dict[str, str], refused_names: str, where: str
) -> None:
    """flash-attn's setup.py downloads a wheel no lockfile hashes unless it is forced to build:
    a lab mate's lockfile saying FALSE (or SKIP_CUDA_BUILD) where the profile says TRUE, or a
    known build switch the profile's stage never sets, is refused, --frozen too."""
    lock = flash_env_lock(tmp_path, env, dist_env=where == "build_env")
    for extra in ((), ("--frozen",)):
        data = refused("plan", "--profile", "fsdp", "--cuda", "cu128", "--lockfile", lock, *extra)
        assert (data["file"], data["stage"], data["profile"]) == (str(lock), "flash-attn", "fsdp")
        assert data["variables"] == [refused_names], data


def test_a_lockfile_may_size_a_build_and_never_drops_what_the_profile_sets(
    tmp_path: Path,
) -> None:
    """Sizing (jobs, threads, architectures) is the lockfile's own to set; a variable it leaves
    out that the profile's stage sets is still set: the build stays forced."""
    lock = flash_env_lock(tmp_path, {"NVCC_THREADS": "2", "FLASH_ATTN_CUDA_ARCHS": "90"})
    args = ("plan", "--profile", "fsdp", "--cuda", "cu128", "--lockfile", lock, "--frozen")
    done = cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    step = next(s for s in json.loads(done.stdout)["steps"] if s["id"] == "flash-attn")
    assert step["env"]["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE", step["env"]
    assert step["env"]["FLASH_ATTN_CUDA_ARCHS"] == "90", step["env"]
    shown = cli(*args).stdout
    said = next(line for line in shown.splitlines() if "the lockfile sets:" in line)
    assert "FLASH_ATTENTION_FORCE_BUILD=TRUE" in said, shown


CLIMB = "https://github.com/Dao-AILab/flash-attention/releases/download/"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"{CLIMB}../../../../attacker/evil/releases/download/v1/x.whl", "a '..' segment"),
        (f"{CLIMB}%2e%2e/%2E%2E/%2e%2e/%2e%2e/attacker/x.whl", "encoded dot, slash"),
        (f"{CLIMB}v2.8.3%2f..%2f..%2fattacker/x.whl", "encoded dot, slash"),
        (f"{CLIMB}v2.8.3//x.whl", "an empty segment"),
        (f"{CLIMB}./v2.8.3/x.whl", "a '.' segment"),
    ],
)
def test_a_kernel_wheel_url_climbing_out_of_its_declared_source_is_refused(
    tmp_path: Path, url: str, said: str
) -> None:
    """The official release path is a string prefix of each URL, but each climbs out of the
    repository (or could, once a server decodes it): refused when the lockfile is read."""
    done = fsdp_plan(fsdp_lock(tmp_path, url))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "kernel_wheel.url" in done.stderr and said in done.stderr, done.stderr
    assert "attacker" not in done.stdout
