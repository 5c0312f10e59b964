"""`--dry-run` on the commands that write: each names what it would write or do (the paths, the
lockfiles, the env and its plan, the command each node runs), exits 0, and leaves every file as
it was (real files under tmp_path, compared before and after)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scaffold import run

from verl_bootstrap.errors import EXIT_OK

REPO = Path(__file__).resolve().parents[1]
CPU_LOCK = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes: what a dry-run must leave as it was. The cache
    folder is left out: planning fills uv's cache, as `install --dry-run` does."""
    files = (p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files if ".cache" not in p.parts}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's home, the tool's home and the cwd, all under tmp_path."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / ".verl-bootstrap"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_lock_dry_run_names_each_lockfile_and_writes_none(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = home / "lockfiles"
    (folder / "cpu").mkdir(parents=True)
    old = folder / "cpu" / "cpu-linux-64.lock.yaml"
    old.write_text("an old lockfile\n", encoding="utf-8")
    before = _tree(home)
    code, out, err = run(["lock", "--profile", "cpu", "--dir", str(folder), "--dry-run"], capsys)
    assert code == EXIT_OK, err
    assert out == f"would regenerate {old.relative_to(home)} (cpu cpu linux-64)\n"  # as cwd
    new = home / "elsewhere" / "cpu.lock.yaml"
    code, out, err = run(["lock", "--profile", "cpu", "-o", str(new), "--dry-run"], capsys)
    assert code == EXIT_OK, err
    assert out == f"would write {new.relative_to(home)} (cpu cpu linux-64)\n"
    assert _tree(home) == before


def test_lock_dry_run_of_every_variant_names_each(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["lock", "--profile", "fsdp", "--dry-run", "--json"], capsys)
    assert code == EXIT_OK, err
    rows = json.loads(out)["lockfiles"]
    assert {r["variant"] for r in rows} == {"cu130", "cu128"}
    for row in rows:  # the current folder's lockfiles/, never the tool's own shipped ones
        assert row["path"] == str(
            home / "lockfiles" / "fsdp" / f"{row['variant']}-linux-64.lock.yaml"
        )
        assert not row["path"].startswith(str(REPO))
        assert row["state"] == "would write"
    assert _tree(home) == {}


def test_export_dry_run_names_the_files_and_writes_none(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["export", "--format", "requirements", "--lockfile", str(CPU_LOCK), "-o", "req"]
    code, out, err = run([*argv, "--dry-run"], capsys)
    assert code == EXIT_OK, err
    assert out.splitlines() == [
        f"would write req/01-torch.txt (requirements, from {CPU_LOCK})",
        f"would write req/02-verl-deps.txt (requirements, from {CPU_LOCK})",
    ]
    assert _tree(home) == {} and not (home / "req").exists()
    # the names are the ones a real export writes
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    assert sorted(_tree(home / "req")) == ["01-torch.txt", "02-verl-deps.txt"]


def test_export_dry_run_of_a_container_names_its_context(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["export", "--format", "apptainer", "--lockfile", str(CPU_LOCK), "--dry-run", "--json"]
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    body = json.loads(out)
    assert body["dry_run"] is True and body["lockfile"] == str(CPU_LOCK)
    assert body["files"] == [
        "verl.def",
        str(home / "verl-bootstrap.lock.yaml"),
        str(home / "verl_bootstrap-*.whl"),
    ]
    assert _tree(home) == {}


def test_export_dry_run_still_refuses_to_overwrite(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "pylock.toml").write_text("mine\n", encoding="utf-8")
    argv = ["export", "--format", "pylock", "--lockfile", str(CPU_LOCK), "-o", "pylock.toml"]
    code, _, err = run([*argv, "--dry-run"], capsys)
    assert code == 2 and "already there" in err
    assert _tree(home) == {"pylock.toml": b"mine\n"}


def test_bundle_dry_run_names_the_archive_and_fetches_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bundle", "--lockfile", str(CPU_LOCK), "-o", "b.tar", "--offline", "--dry-run"]
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    lock = yaml.safe_load(CPU_LOCK.read_text(encoding="utf-8"))
    count = sum(len(s.get("distributions", [])) + len(s.get("build", [])) for s in lock["stages"])
    assert out.startswith(f"would write {home / 'b.tar'} from {CPU_LOCK}: {count} locked packages")
    assert f"verl {lock['verl']['ref']}" in out
    assert _tree(home) == {}


def test_onboard_dry_run_shows_the_env_and_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = home / "lab.yaml"
    config.write_text(
        yaml.safe_dump({"schema_version": 1, "defaults": {"profile": "cpu"}}), encoding="utf-8"
    )
    before = _tree(home)
    prefix = home / "envs" / "rl"
    argv = ["onboard", "--config", str(config), "--prefix", str(prefix)]
    argv += ["--lockfile", str(CPU_LOCK), "--shell-init", "--shell", "bash", "--dry-run"]
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    plan = out.split("would build", 1)[0]  # the install's plan comes first
    assert "verify [verify]" in plan and f"write {prefix}/" in plan
    assert f"would build {prefix} (profile cpu)" in out
    assert f"would write {home / '.verl-bootstrap' / 'activate'}" in out
    assert f"would add the line that sources it to {home / '.bashrc'}" in out
    assert _tree(home) == before and not prefix.exists()


def test_onboard_dry_run_of_the_script_writes_no_script(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = home / "lab.yaml"
    config.write_text(
        yaml.safe_dump({"schema_version": 1, "defaults": {"profile": "cpu"}}), encoding="utf-8"
    )
    before = _tree(home)
    argv = ["onboard", "--config", str(config), "--emit-script", "onboard.sh", "--dry-run"]
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    assert out.startswith("would write onboard.sh (") and "lines, executable)" in out
    assert _tree(home) == before


def test_cluster_install_dry_run_names_the_command_and_asks_no_node(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = str(home / "env")
    argv = ["cluster", "install", "--slurm", "--prefix", prefix, "--profile", "cpu"]
    argv += ["--lockfile", str(CPU_LOCK), "--tool", "/opt/vb", "--dry-run"]
    code, out, err = run(argv, capsys)
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert lines[0].startswith(f"would install {prefix} on each node (")
    assert lines[1] == (
        f"would run: /opt/vb install --profile cpu --prefix {prefix} --wait 3600 "
        f"--locked --lockfile {CPU_LOCK}"
    )
    assert lines[2] == "then would verify every node of the Slurm allocation"
    assert _tree(home) == {} and not (home / "env").exists()


def test_cluster_install_dry_run_names_the_ray_cluster_and_wants_a_target(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["cluster", "install", "--prefix", str(home / "env"), "--profile", "cpu", "--dry-run"]
    code, out, err = run([*argv, "--ray-address", "head:6379"], capsys)
    assert code == EXIT_OK, err
    assert out.splitlines()[-1] == "then would verify every node of the Ray cluster at head:6379"
    code, out, err = run(argv, capsys)
    assert code == 2 and "--slurm" in err and "--ray-address" in err and not out
    assert _tree(home) == {}
