"""Shared fixtures: a real local verl repo, a real local conda channel, and CLI helpers."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cpuenv import Installed, install_cpu_env
from kernellab import Lab, make_lab
from lockfixtures import TOMORROW, make_lock
from slurmcluster import SlurmCluster, running_slurm
from verlrepo import make_two_release_repo, make_verl_repo

from verl_bootstrap import proc


def pytest_report_header() -> str:
    """The free disk where the tests make their envs: a real install's disk check refuses a
    profile whose `disk_gb` does not fit, so a red run on a small disk shows why at the top."""
    free = shutil.disk_usage(tempfile.gettempdir()).free
    return f"disk: {free / 1e9:.1f} GB free in {tempfile.gettempdir()}"


@pytest.fixture(scope="session", autouse=True)
def tool_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tool's home for this session: runs register their prefixes there, never in the user's."""
    home = tmp_path_factory.mktemp("tool-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERL_BOOTSTRAP_HOME", str(home))
        patch.delenv("VERL_BOOTSTRAP_PREFIX", raising=False)  # an env active where tests run
        # the options this run was started with (a --basetemp, say) are this run's: a pytest the
        # tests start (verl's suite, a probe) would wipe that folder under the running tests
        patch.delenv("PYTEST_ADDOPTS", raising=False)
        yield home


@pytest.fixture(scope="session")
def verl_repo_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real verl repo (v0.9.1) for tests that only read it."""
    return make_verl_repo(tmp_path_factory.mktemp("verl-src") / "verl")


@pytest.fixture(scope="session")
def verl_two_releases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real verl repo holding v0.9.0 then v0.9.1 (each commit made from its release sdist)."""
    return make_two_release_repo(tmp_path_factory.mktemp("verl-two") / "verl")


@pytest.fixture(scope="session")
def cpu_env_session(tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path) -> Installed:
    """One real install of the cpu profile (v0.9.1) per session; tests must not change it."""
    return install_cpu_env(tmp_path_factory, verl_repo_session)


@pytest.fixture(scope="session")
def kernel_lab(tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path) -> Lab:
    """The stand-in kernel's lab (tests/kernellab.py): built from source once per session."""
    return make_lab(tmp_path_factory.mktemp("kernel-lab"), verl_repo_session)


@pytest.fixture(scope="module")
def lab_here(kernel_lab: Lab) -> Iterator[Lab]:
    """The kernel lab with its home (so its wheelhouse) and find-links set for one module's runs."""
    with kernel_lab.environment():
        yield kernel_lab


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A real three-node Slurm on this host (tests/slurmcluster.py), for the session."""
    with running_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


@pytest.fixture
def verl_repo(tmp_path: Path) -> Path:
    """A fresh real verl repo (v0.9.1) this test may change."""
    return make_verl_repo(tmp_path / "verl-src")


@pytest.fixture(scope="session")
def python_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real local conda channel holding a python package repackaged from this interpreter."""
    from condafixture import make_python_channel  # noqa: PLC0415

    return make_python_channel(tmp_path_factory.mktemp("conda-channel"))


@pytest.fixture(autouse=True)
def _children_allowed() -> Iterator[None]:
    """A test that interrupts a run (terminate_all) must not stop the next test's children."""
    yield
    proc.allow_new_children()


@pytest.fixture(scope="session")
def cpu_lock(tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path) -> Path:
    """The cpu profile locked for a venv (tests/lockfixtures.py), shared by the lock, export and
    bundle tests."""
    return make_lock(tmp_path_factory.getbasetemp(), verl_repo_session, "cpu-venv")


@pytest.fixture(scope="session")
def conda_lock(
    tmp_path_factory: pytest.TempPathFactory, verl_repo_session: Path, python_channel: Path
) -> Path:
    """The cpu profile locked for a conda env: its conda part solved from the local channel."""
    extra = ("--backend", "conda", "--channel", str(python_channel))
    base = tmp_path_factory.getbasetemp()
    return make_lock(base, verl_repo_session, "cpu-conda", *extra, cutoff=str(TOMORROW))


@pytest.fixture(scope="session")
def cpu_bundle(tmp_path_factory: pytest.TempPathFactory, cpu_lock: Path) -> Path:
    """The cpu lock's offline bundle, made once per session (downloads cached across runs)."""
    from bundlefixtures import make_bundle  # noqa: PLC0415

    return make_bundle(cpu_lock, tmp_path_factory.getbasetemp() / "bundles" / "cpu.tar")


@pytest.fixture(scope="session")
def offline_image(tmp_path_factory: pytest.TempPathFactory, cpu_bundle: Path) -> tuple[Path, str]:
    """An image tree built with no network from the cpu bundle, by the Apptainer definition's
    own %files and %post (which run the bundle's install.sh, so the tool comes from the bundle
    too); (the image's root, the build's output). Its env is ROOT/verl."""
    from bundlefixtures import bundle_tool, run_post_offline, tool_env  # noqa: PLC0415

    definition = cpu_bundle.parent / "verl.def"
    done = bundle_tool(
        "export",
        "--format",
        "apptainer",
        "--lockfile",
        str(_lock_in(cpu_bundle)),
        "--bundle",
        str(cpu_bundle),
        "--output",
        str(definition),
    )
    assert done.returncode == 0, done.stderr
    root = tmp_path_factory.mktemp("image")
    output = run_post_offline(definition, root, tool_env(VERL_BOOTSTRAP_CACHE=str(root / "cache")))
    return root, output


def _lock_in(bundle: Path) -> Path:
    """The lockfile a session bundle was made from (beside it under the base temp folder)."""
    return bundle.parent.parent / "locks" / "cpu-venv.lock.yaml"


# What `make test` leaves to `make test-real` (CI runs both; nothing is dropped): the tests that
# make something big for real. Named here, once, so the fast tier is one list a maintainer reads.
# Figures: seconds per module in a full run at main on this 2-core host under load (--durations).
# First the session fixtures (a test needs one directly or through another fixture):
REAL_SLOW_FIXTURES = frozenset(
    {
        "cpu_env_session",  # a full cpu install (torch, verl): ~60 s, 39 tests
        "slurm_cluster",  # a real Slurm: munged, slurmctld, three slurmd
        "kernel_lab",  # the stand-in kernel built from source with the CPU torch
        "cpu_bundle",  # the cpu lock's whole offline bundle
        "offline_image",  # an image tree built offline from that bundle
    }
)
# Then the modules whose own module fixtures or tests install, lock or train for real throughout:
REAL_SLOW_MODULES = frozenset(
    {
        "test_lock_real.py",  # 182 s: real locks, installed --locked into a venv and a conda env
        "test_kernels_prebuilt.py",  # 148 s: locks and locked installs from loopback sources
        "test_export_real.py",  # 126 s: every export installed by the tool it is for
        "test_lifecycle.py",  # 97 s: one env made, failed, resumed, switched, removed
        "test_lock_contract.py",  # 83 s: verl's real contract over real locks
        "test_lock_uvlock.py",  # 81 s: the cu130 stack resolved against a real uv.lock
        "test_kernels_e2e.py",  # 55 s: the compiled kernel built, published, taken
        "test_cluster_ray.py",  # 54 s: a real three-node Ray cluster
        "test_kernels_whole.py",  # 38 s: whole kernel wheels locked and installed
        "test_selfpack.py",  # 38 s: the tool pip-installed, then packing itself
        "test_onboard.py",  # 23 s+: a new user onboarded to a verified env
        "test_e2e_cpu.py",  # the cpu install, killed and resumed, the sdist fallback
        "test_older_release.py",  # v0.9.0 installed for real with its own stack
        "test_verify_train.py",  # its own cpu env, then real SFT and GRPO steps
        "test_secrets.py",  # 25 s: two installs through a token-guarded lab mirror
        "test_secrets_argv.py",  # 26 s: an authenticated install, its processes sampled
        "test_site_mirror.py",  # the cpu install from the lab's own index and git mirror
    }
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the marker must be there when it reads
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark real_slow each test of REAL_SLOW_MODULES or needing a fixture of REAL_SLOW_FIXTURES."""
    gone = sorted(m for m in REAL_SLOW_MODULES if not (Path(__file__).parent / m).is_file())
    if gone:  # a renamed module would otherwise slip into the fast tier unseen
        raise pytest.UsageError(f"tests/conftest.py: REAL_SLOW_MODULES names no such file: {gone}")
    for item in items:
        if _real_slow(item):
            item.add_marker(pytest.mark.real_slow)


def _real_slow(item: pytest.Item) -> bool:
    if item.path.name in REAL_SLOW_MODULES:
        return True
    return bool(REAL_SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())))
