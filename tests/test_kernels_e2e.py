"""The wheelhouse loop with a real compiled torch extension (the stand-in kernel, built with the
CPU torch's cpp_extension): built from source once and published, taken by the next env with no
compiler, refused for an env with another key, and an `undefined symbol` caught after install."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kernellab import Lab, build_broken_wheel, install_argv
from scaffold import Run, run_cli

from verl_bootstrap.errors import EXIT_OK, CommandFailed
from verl_bootstrap.kernels.wheelhouse import Wheelhouse
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.paths import env_lockfile, file_sha256
from verl_bootstrap.plan.doctor.checks_env import find_uv

BUILD_COMMAND = " wheel -v --no-deps --no-cache-dir --no-binary standin-kernel"


def assert_kernel_installed(run: Run, prefix: Path) -> None:
    """The kernel stage is done and its compiled module answers; verify fails only on `uv pip
    check`, because this profile installs verl without its dependencies (not what is tested)."""
    assert run.step("standin")["status"] == "done", run.step("standin")
    assert run.step("record-lock")["status"] == "done"
    code = "import standin_kernel; print(standin_kernel.device_name())"
    python = prefix / "bin" / "python"
    answer = subprocess.run([python, "-c", code], check=False, capture_output=True, text=True)
    assert answer.stdout.strip() == "CPU", answer.stderr
    reason = run.step("verify")["reason"]
    assert reason.startswith("verification failed: uv pip check"), reason
    assert "import" not in reason


def test_the_first_env_builds_the_kernel_and_publishes_it(lab_here: Lab) -> None:
    assert_kernel_installed(lab_here.first, lab_here.root / "env-a")
    log = lab_here.first.log("standin")
    assert BUILD_COMMAND in log
    assert "c++" in log or "g++" in log  # the compiler really ran
    [entry] = Wheelhouse(lab_here.wheelhouse).entries()
    assert entry.file == "standin_kernel-0.1.0-cp311-cp311-linux_x86_64.whl"
    assert entry.key.describe() == "torch 2.13.0+cpu, cp311, cxx11abi, linux_x86_64"
    assert f"published {entry.file} to {lab_here.wheelhouse}" in log
    progress = lab_here.first.body["build_progress"]["standin"]  # the compiled units, live
    assert progress["units"] >= 1 and progress["seconds"] >= 0, progress
    assert "compiled unit(s)" in progress["message"]


def test_the_second_env_takes_the_wheel_without_a_compiler(lab_here: Lab) -> None:
    assert_kernel_installed(lab_here.second, lab_here.root / "env-b")
    log = lab_here.second.log("standin")
    assert BUILD_COMMAND not in log and "g++" not in log
    assert "prebuilt from the lab wheelhouse, built for torch 2.13.0+cpu" in log
    assert "no compiler ran" in log
    [entry] = Wheelhouse(lab_here.wheelhouse).entries()
    for prefix, source in (("env-a", "build"), ("env-b", "wheelhouse")):  # the env records name it
        dist = read_lockfile(env_lockfile(lab_here.root / prefix)).distributions()["standin-kernel"]
        assert dist.kernel_wheel is not None
        assert (dist.kernel_wheel.source, dist.kernel_wheel.sha256) == (source, entry.sha256)
        assert dist.kernel_wheel.key.model_dump() == entry.key.to_json()


def test_a_wheel_for_another_torch_is_refused(lab_here: Lab, tmp_path: Path) -> None:
    wheel = next(lab_here.wheelhouse.glob("*.whl"))
    other = tmp_path / "other-house"
    key = "torch=2.12.0,cuda=cpu,cxx11abi=TRUE,python=cp311,platform=linux_x86_64"
    added = run_cli(["wheelhouse", "add", str(wheel), "--key", key, "--wheelhouse", str(other)])
    assert added.code == EXIT_OK, added.stderr
    site = tmp_path / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {other}\n")
    plan = run_cli(
        ["plan", *install_argv(tmp_path / "env-c", lab_here.repo)[1:], "--config", str(site)]
    )
    assert plan.code == EXIT_OK, plan.stderr
    kernel = next(s for s in plan.body["steps"] if s["id"] == "standin")["kernel"]
    assert kernel["source"] == "build"
    assert (
        "only for other builds: torch 2.12.0+cpu, cp311, cxx11abi, linux_x86_64"
        in (kernel["reason"])
    )
    assert "torch 2.12.0 (env: 2.13.0)" in kernel["reason"]


def test_a_mismatched_wheel_forced_in_fails_its_load_check_and_the_kernel_is_built(
    lab_here: Lab, tmp_path: Path
) -> None:
    """Last in this file: it re-runs env-b's kernel stage with a wheel whose key is a lie. Its
    `undefined symbol` is caught after install; it is uninstalled and, no other source having a
    wheel, the kernel is built, and the built wheel replaces the bad one in that wheelhouse."""
    uv = find_uv()
    assert uv is not None
    env = lab_here.root / "env-b"
    broken = build_broken_wheel(uv, env / "bin" / "python", tmp_path)
    forced = tmp_path / "forced-house"
    added = run_cli(
        ["wheelhouse", "add", str(broken), "--key-of", str(env), "--wheelhouse", str(forced)]
    )
    assert added.code == EXIT_OK, added.stderr
    site = tmp_path / "site.yaml"
    site.write_text(f"schema_version: 1\nwheelhouse: {forced}\n")
    # another site config than env-b was made with: a change the user accepts with --yes
    argv = [*install_argv(env, lab_here.repo), "--config", str(site), "--force", "standin", "--yes"]
    run = run_cli(argv)
    assert run.step("standin")["status"] == "done", run.step("standin")
    log = run.log("standin")
    said = log[log.index("fails its load check") :]
    assert said.startswith(
        "fails its load check (standin_kernel._C does not load: undefined symbol "
        "_ZN3c1023symbol_of_another_torchEi. The wheel was built for torch 2.13.0+cpu, cp311, "
        "cxx11abi, linux_x86_64; this env has torch 2.13.0+cpu"
    ), said[:300]
    assert "uninstalling it and trying the next source" in log
    assert BUILD_COMMAND in log  # then the source build
    [entry] = Wheelhouse(forced).entries()
    assert entry.sha256 != file_sha256(broken)  # the built wheel replaced the bad one
    code = "import standin_kernel; print(standin_kernel.device_name())"
    answer = subprocess.run(
        [env / "bin" / "python", "-c", code], check=False, capture_output=True, text=True
    )
    assert answer.stdout.strip() == "CPU", answer.stderr  # the built wheel loads


def test_a_prebuilt_index_gives_a_wheel_and_never_builds(lab_here: Lab, tmp_path: Path) -> None:
    from verl_bootstrap import proc  # noqa: PLC0415
    from verl_bootstrap.kernels.build import download_wheel  # noqa: PLC0415

    wheel = next(lab_here.wheelhouse.glob("*.whl"))
    project = tmp_path / "simple" / "standin-kernel"
    project.mkdir(parents=True)
    (project / wheel.name).write_bytes(wheel.read_bytes())
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    log = tmp_path / "download.log"
    got = download_wheel(
        "standin-kernel==0.1.0",
        (tmp_path / "simple").as_uri(),
        python=lab_here.root / "env-a" / "bin" / "python",
        dest=tmp_path / "got",
        run=lambda argv: proc.run(argv, log_path=log),
    )
    assert got.read_bytes() == wheel.read_bytes()
    (project / wheel.name).unlink()  # only the sdist is left: refused, never built
    sdist = lab_here.root / "links" / "standin-kernel-0.1.0.tar.gz"
    (project / sdist.name).write_bytes(sdist.read_bytes())
    (project / "index.html").write_text(f'<a href="{sdist.name}">{sdist.name}</a>\n')
    with pytest.raises(CommandFailed):
        download_wheel(
            "standin-kernel==0.1.0",
            (tmp_path / "simple").as_uri(),
            python=lab_here.root / "env-a" / "bin" / "python",
            dest=tmp_path / "none",
            run=lambda argv: proc.run(argv, log_path=log),
        )
