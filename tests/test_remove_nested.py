"""`remove` looks at every file of the prefix, not only its top level: a user's file deep inside a
real venv or conda env refuses the removal, names the file, and nothing is deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_e2e_cpu import closed_port
from test_lifecycle import DATA, run
from tinyenv import HOST_XY, tiny_parts

from verl_bootstrap.errors import EXIT_OK, EXIT_REFUSED
from verl_bootstrap.lifecycle.owned import foreign_files

SITE = f"lib/python{HOST_XY}/site-packages"


def files_of(prefix: Path) -> list[str]:
    return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))


def write(*paths: Path) -> list[Path]:
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine\n", encoding="utf-8")
    return list(paths)


def refuses_then_removes(prefix: Path, mine: list[Path]) -> None:
    """`mine` (the user's files) refuse the removal, named; without them the env goes."""
    before = files_of(prefix)
    refused = run(["remove", "--prefix", str(prefix), "--yes"])
    assert refused.code == EXIT_REFUSED, refused.err
    names = ", ".join(str(p.relative_to(prefix)) for p in sorted(mine))
    assert f"holds files verl-bootstrap did not make: {names}; nothing was deleted" in refused.err
    assert files_of(prefix) == before
    for path in mine:
        path.unlink()
    removed = run(["remove", "--prefix", str(prefix), "--yes"])
    assert removed.code == EXIT_OK, removed.err
    assert not prefix.exists()


def test_a_users_file_deep_in_a_venv_refuses_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = tiny_parts(tmp_path, monkeypatch)
    prefix = tmp_path / "env"
    made = run(["--profile", str(parts.profile), "--prefix", str(prefix), "--verl-source",
                str(parts.repo), "--cuda", "cpu"])  # fmt: skip
    assert made.code == EXIT_OK, made.err
    assert foreign_files(prefix) == []  # everything a real install leaves is known
    link = prefix / "bin" / "my-link"
    link.symlink_to("/etc/hostname")  # listed as the user's, not followed
    mine = write(prefix / SITE / "mynotes.txt", prefix / SITE / "vbtiny" / "scratch.py",
                 prefix / "src" / "notes" / "run.sh")  # beside verl's checkout  # fmt: skip
    refuses_then_removes(prefix, [link, *mine])
    assert Path("/etc/hostname").exists()


def test_a_users_file_deep_in_a_conda_env_refuses_remove(
    tmp_path: Path, python_channel: Path
) -> None:
    prefix = tmp_path / "conda-env"
    away = f"http://127.0.0.1:{closed_port()}/verl.git"  # fetch-source fails; the env is made
    run(["--profile", str(DATA / "light" / "light.yaml"), "--prefix", str(prefix),
         "--backend", "conda", "--channel", str(python_channel), "--verl-source", away,
         "--verl-ref", "main", "--allow-unsupported-ref"])  # fmt: skip
    assert (prefix / "conda-meta").is_dir()
    assert foreign_files(prefix) == []
    mine = write(prefix / "lib" / f"python{HOST_XY}" / "my_module.py", prefix / "bin" / "run.sh")
    refuses_then_removes(prefix, mine)
