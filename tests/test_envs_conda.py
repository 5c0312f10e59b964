"""The conda backends, for real: prefixes solved and installed by py-rattler, locally."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from uv import find_uv_bin

from tests.condafixture import MARKER_PACKAGE, PYTHON_VERSION, python_channel_fixture
from verl_bootstrap import paths
from verl_bootstrap.errors import InputError, StepFailed
from verl_bootstrap.installer.envs.base import EnvRequest, env_python
from verl_bootstrap.installer.envs.conda import (
    CondaBackend,
    ExternalCondaBackend,
    python_spec,
)
from verl_bootstrap.installer.envs.condarc import (
    CondaSettings,
    channel_url,
    channel_urls,
    condarc_paths,
    load_condarc,
    read_condarc,
)

HOST_XY = "{}.{}".format(*sys.version_info[:2])
NO_CONDARC = CondaSettings()  # tests must not depend on this machine's .condarc

python_channel = pytest.fixture(scope="session")(python_channel_fixture)


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conda-cache")


@pytest.fixture
def backend(cache_root: Path) -> CondaBackend:
    return CondaBackend(cache_root=cache_root, settings=NO_CONDARC)


def request_for(prefix: Path, channel: Path | str, **changes: Any) -> EnvRequest:
    """A request for python >=3.10,<3.13 (preferring the host's) from one channel."""
    base = EnvRequest(
        prefix=prefix,
        python_requires=">=3.10,<3.13",
        python_prefer=HOST_XY,
        channels=(str(channel),),
    )
    return dataclasses.replace(base, **changes)


@pytest.fixture(scope="module")
def seeded_prefix(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> Path:
    """One prefix with pip seeded, shared by the tests that only read it."""
    prefix = tmp_path_factory.mktemp("seeded") / "env"
    cache = tmp_path_factory.mktemp("seeded-cache")
    request = request_for(
        prefix, python_channel, seed_pip=True, log_path=prefix.parent / "create.log"
    )
    assert CondaBackend(cache_root=cache, settings=NO_CONDARC).create(request) is True
    return prefix


def run_python(prefix: Path, code: str) -> str:
    done = subprocess.run(
        [str(env_python(prefix)), "-c", code], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


# --- CondaBackend.create, for real ------------------------------------------------------------


def test_create_makes_a_conda_prefix_whose_python_works(seeded_prefix: Path) -> None:
    assert (seeded_prefix / "conda-meta" / f"python-{PYTHON_VERSION}-h0_0.json").is_file()
    code = "import ssl, sqlite3, ctypes, venv, sys; print('%d.%d.%d' % sys.version_info[:3])"
    assert run_python(seeded_prefix, code) == PYTHON_VERSION
    assert run_python(seeded_prefix, "import sys; print(sys.prefix)") == str(seeded_prefix)


def test_create_writes_what_it_solved_and_installed_to_the_log(seeded_prefix: Path) -> None:
    log = (seeded_prefix.parent / "create.log").read_text()
    assert f"solved: python>=3.10,<3.13,{HOST_XY}.*\n" in log
    assert f"installed: python {PYTHON_VERSION} h0_0 file://" in log
    assert "seeded pip" in log


def test_seed_pip_gives_a_working_pip_and_uv_installs_into_the_prefix(
    seeded_prefix: Path,
) -> None:
    assert run_python(seeded_prefix, "import pip; print('ok')") == "ok"
    uv = find_uv_bin()
    subprocess.run(
        [str(uv), "pip", "install", "--python", str(env_python(seeded_prefix)), "six"],
        check=True,
        capture_output=True,
    )
    assert run_python(seeded_prefix, "import six; print(six.__file__)").startswith(
        str(seeded_prefix / "lib")
    )


def test_create_again_reuses_the_prefix_and_installs_nothing(
    seeded_prefix: Path, python_channel: Path, backend: CondaBackend
) -> None:
    meta = seeded_prefix / "conda-meta" / f"python-{PYTHON_VERSION}-h0_0.json"
    before = meta.stat().st_mtime_ns
    request = request_for(seeded_prefix, python_channel, seed_pip=True)
    assert backend.create(request) is False
    assert meta.stat().st_mtime_ns == before


def test_external_backend_reuses_a_matching_prefix_without_running_conda(
    seeded_prefix: Path, python_channel: Path
) -> None:
    missing_exe = seeded_prefix.parent / "no-such-micromamba"
    request = request_for(seeded_prefix, python_channel)
    assert ExternalCondaBackend(missing_exe).create(request) is False


def test_a_preferred_python_the_channel_lacks_falls_back_to_the_range(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    log = tmp_path / "create.log"
    request = request_for(tmp_path / "env", python_channel, python_prefer="3.9", log_path=log)
    assert backend.create(request) is True
    assert "solved: python>=3.10,<3.13\n" in log.read_text()


def test_a_prefix_holding_only_our_state_folder_is_used(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    prefix = tmp_path / "env"
    (prefix / ".verl-bootstrap").mkdir(parents=True)
    (prefix / ".verl-bootstrap" / "state.json").write_text("{}")
    assert backend.create(request_for(prefix, python_channel)) is True
    assert (prefix / "conda-meta").is_dir()
    assert (prefix / ".verl-bootstrap" / "state.json").read_text() == "{}"


def test_a_file_url_channel_works_like_its_folder(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    request = request_for(tmp_path / "env", python_channel.as_uri())
    assert backend.create(request) is True
    assert env_python(tmp_path / "env").exists()


def test_extra_conda_packages_are_added_to_an_existing_prefix_in_place(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    prefix = tmp_path / "env"
    assert backend.create(request_for(prefix, python_channel)) is True
    python_meta = prefix / "conda-meta" / f"python-{PYTHON_VERSION}-h0_0.json"
    before = python_meta.stat().st_mtime_ns
    wider = request_for(prefix, python_channel, conda_packages=(f"{MARKER_PACKAGE} >=1",))
    assert backend.create(wider) is True
    assert (prefix / "share" / MARKER_PACKAGE / "README").is_file()
    assert python_meta.stat().st_mtime_ns == before
    assert backend.create(wider) is False


def test_a_recorded_python_whose_interpreter_is_gone_is_reinstalled(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    prefix = tmp_path / "env"
    assert backend.create(request_for(prefix, python_channel)) is True
    env_python(prefix).unlink()
    assert backend.create(request_for(prefix, python_channel)) is True
    assert run_python(prefix, "import sys; print(sys.prefix)") == str(prefix)


# --- refusals and clear errors ----------------------------------------------------------------


def test_a_foreign_non_empty_folder_is_refused_and_left_untouched(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    prefix = tmp_path / "mine"
    prefix.mkdir()
    (prefix / "thesis.tex").write_text("precious")
    with pytest.raises(InputError, match=r"refusing to create a conda env in .*mine"):
        backend.create(request_for(prefix, python_channel))
    assert [p.name for p in prefix.iterdir()] == ["thesis.tex"]
    assert (prefix / "thesis.tex").read_text() == "precious"


def test_a_venv_at_the_prefix_is_refused_as_a_venv(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    prefix = tmp_path / "venv"
    prefix.mkdir()
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    with pytest.raises(InputError, match="is a venv"):
        backend.create(request_for(prefix, python_channel))


def test_a_missing_channel_folder_is_an_input_error(tmp_path: Path, backend: CondaBackend) -> None:
    missing = tmp_path / "no-channel"
    with pytest.raises(
        InputError, match=re.escape(f"conda channel folder {missing} does not exist")
    ):
        backend.create(request_for(tmp_path / "env", missing))
    assert not (tmp_path / "env").exists()


def test_a_folder_that_is_not_a_channel_is_an_input_error(
    tmp_path: Path, backend: CondaBackend
) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="is not a conda channel") as info:
        backend.create(request_for(tmp_path / "env", tmp_path / "plain"))
    assert info.value.hint is not None


def test_an_unreachable_channel_url_is_a_step_failure_naming_it(
    tmp_path: Path, backend: CondaBackend
) -> None:
    url = "http://127.0.0.1:9/my-mirror"  # port 9 (discard) refuses at once
    with pytest.raises(
        StepFailed, match=re.escape("could not read the conda channels http://127.0.0.1:9")
    ):
        backend.create(request_for(tmp_path / "env", url))


def test_a_python_range_no_package_satisfies_names_the_range_and_channels(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    request = request_for(
        tmp_path / "env", python_channel, python_requires=">=3.13", python_prefer="3.13"
    )
    with pytest.raises(StepFailed) as info:
        backend.create(request)
    message = info.value.message
    assert "python>=3.13" in message
    assert python_channel.as_uri() in message
    assert not (tmp_path / "env" / "conda-meta").exists()


def test_a_missing_conda_package_is_named_in_the_error(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    request = request_for(tmp_path / "env", python_channel, conda_packages=("cudatoolkit",))
    with pytest.raises(StepFailed, match="cudatoolkit"):
        backend.create(request)


def test_an_unreadable_conda_meta_record_is_an_input_error(
    tmp_path: Path, python_channel: Path, backend: CondaBackend
) -> None:
    (tmp_path / "env" / "conda-meta").mkdir(parents=True)
    (tmp_path / "env" / "conda-meta" / "broken-1-0.json").write_text("{oops")
    with pytest.raises(InputError, match=re.escape("broken-1-0.json is unreadable")):
        backend.create(request_for(tmp_path / "env", python_channel))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"python_requires": ">=3.10,,<<3.13"}, "invalid python range"),
        ({"python_prefer": "three"}, "invalid preferred python 'three'"),
        ({"conda_packages": ("numpy >>=1",)}, "invalid conda package spec 'numpy >>=1'"),
    ],
)
def test_an_invalid_request_is_an_input_error_before_any_work(
    tmp_path: Path, backend: CondaBackend, changes: dict[str, object], message: str
) -> None:
    request = request_for(tmp_path / "env", tmp_path / "no-channel", **changes)
    with pytest.raises(InputError, match=message):
        backend.create(request)
    with pytest.raises(InputError, match=message):
        ExternalCondaBackend(Path("micromamba")).create(request)
    assert not (tmp_path / "env").exists()


def test_python_spec_turns_a_pep440_range_into_a_conda_spec() -> None:
    assert python_spec(">= 3.10, < 3.13") == "python>=3.10,<3.13"
    assert python_spec("") == "python"


# --- describe ---------------------------------------------------------------------------------


def test_describe_shows_the_resolved_channels_and_specs(tmp_path: Path) -> None:
    settings = CondaSettings(channel_alias="https://mirror.example/conda")
    backend = CondaBackend(cache_root=tmp_path, settings=settings)
    request = request_for(tmp_path / "env", "conda-forge", conda_packages=("cuda-nvcc 12.4.*",))
    assert backend.describe(request) == [
        "rattler-create",
        "-p",
        str(tmp_path / "env"),
        "-c",
        "https://mirror.example/conda/conda-forge",
        "python>=3.10,<3.13",
        "cuda-nvcc 12.4.*",
    ]


def test_describe_masks_credentials_in_channel_urls(tmp_path: Path) -> None:
    settings = CondaSettings(channel_alias="https://user:s3cret@mirror.example/t/tok")
    argv = CondaBackend(cache_root=tmp_path, settings=settings).describe(
        request_for(tmp_path / "env", "conda-forge")
    )
    assert "s3cret" not in " ".join(argv)


def test_external_backend_describes_its_create_command(tmp_path: Path) -> None:
    exe = Path("/opt/micromamba/bin/micromamba")
    request = request_for(tmp_path / "env", "conda-forge", conda_packages=("numpy",), seed_pip=True)
    assert ExternalCondaBackend(exe).describe(request) == [
        str(exe),
        "create",
        "-y",
        "-p",
        str(tmp_path / "env"),
        "--override-channels",
        "-c",
        "conda-forge",
        "python>=3.10,<3.13",
        "numpy",
        "pip",
    ]


def test_external_backend_refuses_an_executable_it_cannot_find(
    tmp_path: Path, python_channel: Path
) -> None:
    backend = ExternalCondaBackend(str(tmp_path / "bin" / "micromamba"))
    with pytest.raises(InputError, match="micromamba was not found"):
        backend.create(request_for(tmp_path / "env", python_channel))
    assert not (tmp_path / "env").exists()


def test_external_backend_without_channels_leaves_them_to_its_condarc(tmp_path: Path) -> None:
    request = request_for(tmp_path / "env", "x", channels=())
    argv = ExternalCondaBackend(Path("conda")).describe(request)
    assert argv == ["conda", "create", "-y", "-p", str(tmp_path / "env"), "python>=3.10,<3.13"]


def test_the_cache_root_follows_verl_bootstrap_cache_then_the_user_cache(tmp_path: Path) -> None:
    assert paths.cache_root({"VERL_BOOTSTRAP_CACHE": str(tmp_path)}) == tmp_path
    assert paths.cache_root({"XDG_CACHE_HOME": "/c"}) == Path("/c/verl-bootstrap")


# --- .condarc ---------------------------------------------------------------------------------

CONDARC = """\
channels:
  - conda-forge
  - defaults
channel_alias: https://mirror.lab.example/conda/
default_channels:
  - https://mirror.lab.example/anaconda/pkgs/main
custom_channels:
  nvidia: https://nvidia.mirror.example/
"""


def test_condarc_maps_names_through_alias_custom_channels_and_defaults(tmp_path: Path) -> None:
    rc = tmp_path / ".condarc"
    rc.write_text(CONDARC)
    settings = read_condarc([rc])
    assert settings.sources == (rc,)
    assert channel_urls((), settings) == (
        "https://mirror.lab.example/conda/conda-forge",
        "https://mirror.lab.example/anaconda/pkgs/main",
    )
    assert channel_url("nvidia/label/cuda-12.4", settings) == (
        "https://nvidia.mirror.example/nvidia/label/cuda-12.4"
    )


def test_an_explicit_channel_url_or_folder_wins_over_condarc(tmp_path: Path) -> None:
    rc = tmp_path / ".condarc"
    rc.write_text(CONDARC)
    settings = read_condarc([rc])
    explicit = ("https://conda.example/pytorch/", str(tmp_path / "chan"))
    assert channel_urls(explicit, settings) == (
        "https://conda.example/pytorch",
        (tmp_path / "chan").as_uri(),
    )


def test_condarc_env_var_file_wins_over_the_home_file(tmp_path: Path) -> None:
    (tmp_path / ".condarc").write_text(CONDARC)
    override = tmp_path / "lab.yml"
    override.write_text("channel_alias: https://other.example\nchannels: [bioconda]\n")
    env = {"CONDARC": str(override)}
    settings = load_condarc(env, tmp_path)
    assert channel_urls((), settings) == ("https://other.example/bioconda",)
    assert settings.custom_channels == {"nvidia": "https://nvidia.mirror.example/"}
    assert condarc_paths(env, tmp_path)[-1] == override


def test_without_any_condarc_the_channel_is_conda_forge(tmp_path: Path) -> None:
    settings = load_condarc({}, tmp_path)
    assert channel_urls((), settings) == ("https://conda.anaconda.org/conda-forge",)


def test_a_malformed_condarc_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    rc = tmp_path / ".condarc"
    rc.write_text("channels: conda-forge\n")
    with pytest.raises(InputError, match=r"channels in .*\.condarc must be a list"):
        read_condarc([rc])
    rc.write_text("channels: [unclosed\n")
    with pytest.raises(InputError, match=r"\.condarc:2: invalid YAML in conda settings file"):
        read_condarc([rc])


def test_condarc_channels_drive_the_backend_when_the_request_names_none(
    tmp_path: Path, python_channel: Path, cache_root: Path
) -> None:
    rc = tmp_path / ".condarc"
    rc.write_text(f"channels:\n  - {python_channel}\n")
    backend = CondaBackend(cache_root=cache_root, settings=read_condarc([rc]))
    request = request_for(tmp_path / "env", "x", channels=())
    assert backend.describe(request)[4] == python_channel.as_uri()
    assert backend.create(request) is True
