"""A bundle from someone else is checked before it can cost anything: only plain-file members, each
of its listed size (checked before a byte is read), a bounded manifest whose every field has a
shape, the lockfile one of its own hashed members; a FIFO or a cut-short bundle is a clear error,
and no `.part` file outlives one. Small hand-made bundles (and real GNU tar for sparse members):
each is refused before anything is installed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from scaffold import REPO, invoke, tool_argv
from tinyenv import HOST_XY

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_REFUSED

LOCK_BODY = b"schema_version: 1\n# a lockfile member\n"
ARTIFACT = b"x" * 50_000
CPU_LOCK = REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest(**changes: Any) -> dict[str, Any]:
    """A manifest that fits this host (cpu, this Python), listing a lockfile and one artifact."""
    members = [
        {
            "path": "lockfile/cpu.lock.yaml",
            "sha256": sha(LOCK_BODY),
            "size": len(LOCK_BODY),
            "role": "lockfile",
        },
        {
            "path": "artifacts/a-1.0-py3-none-any.whl",
            "sha256": sha(ARTIFACT),
            "size": len(ARTIFACT),
            "role": "artifact",
            "name": "a",
        },
    ]
    body = {
        "schema_version": 1,
        "created_by": "verl-bootstrap test",
        "lockfile": members[0]["path"],
        "lockfile_sha256": sha(LOCK_BODY),
        "profile": "cpu",
        "variant": "cpu",
        "platform": "linux-64",
        "python": HOST_XY,
        "glibc": "2.17",
        "backend": "venv",
        "verl_kind": "sdist",
        "members": members,
    }
    return {**body, **changes}


def bundle(dest: Path, body: dict[str, Any], files: dict[str, bytes] | None = None) -> Path:
    """A tar: `body` as manifest.json first, then `files` (default: the listed two)."""
    files = (
        files
        if files is not None
        else {
            "lockfile/cpu.lock.yaml": LOCK_BODY,
            "artifacts/a-1.0-py3-none-any.whl": ARTIFACT,
        }
    )
    with tarfile.open(dest, "w") as tar:
        for name, data in {"manifest.json": json.dumps(body).encode(), **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return dest


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERL_BOOTSTRAP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def install(archive: Path, prefix: Path) -> tuple[int, str]:
    done = invoke(["--bundle", str(archive), "--profile", "cpu", "--prefix", str(prefix)])
    assert not prefix.exists(), "nothing is installed from a refused bundle"
    return done.code, done.err


def refused_member(archive: Path, prefix: Path) -> dict[str, Any]:
    """The install of a bundle refused while unpacking (exit 3): its `--json` error's data."""
    argv = ["--bundle", str(archive), "--profile", "cpu", "--prefix", str(prefix), "--json"]
    done = invoke(argv)
    assert done.code == EXIT_REFUSED, done.err
    assert not prefix.exists(), "nothing is installed from a refused bundle"
    data: dict[str, Any] = done.json()["error"]["data"]
    return data


def invalid_fields(archive: Path, prefix: Path) -> list[str]:
    """The install of a bundle whose manifest is bad input (exit 2): the fields its `--json`
    error names."""
    argv = ["--bundle", str(archive), "--profile", "cpu", "--prefix", str(prefix), "--json"]
    done = invoke(argv)
    assert done.code == EXIT_BAD_INPUT, done.err
    assert not prefix.exists(), "nothing is installed from a refused bundle"
    data = done.json()["error"]["data"]
    assert data["file"] == "manifest.json"
    return [f["field"] for f in data["fields"]]


def unpacked_files(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "changes",
    [
        {"glibc": "abc"},
        {"python": "3"},
        {"python": "3.x"},
        {"lockfile": "/etc/passwd"},
        {"lockfile": "artifacts/a-1.0-py3-none-any.whl"},  # a member, not of role lockfile
        {"lockfile_sha256": "0" * 64},  # not the sha256 its member is listed with
    ],
)
def test_a_manifest_field_out_of_shape_is_bad_input_naming_it(
    tmp_path: Path, cache: Path, changes: dict[str, str]
) -> None:
    archive = bundle(tmp_path / "b.tar", manifest(**changes))
    assert invalid_fields(archive, tmp_path / "env") == list(changes)
    assert unpacked_files(cache) == []


def test_members_that_nest_in_one_another_are_bad_input(tmp_path: Path, cache: Path) -> None:
    body = manifest()
    body["members"] += [
        {"path": "a", "sha256": sha(b"1"), "size": 1, "role": "artifact"},
        {"path": "a/b", "sha256": sha(b"2"), "size": 1, "role": "artifact"},
    ]
    assert invalid_fields(bundle(tmp_path / "b.tar", body), tmp_path / "env") == ["member 'a/b'"]


@pytest.mark.parametrize(
    ("path", "role", "wrong"),
    [
        ("kernels/k-1.0-py3-none-any.whl", "artifact", "role"),
        ("artifacts/k-1.0-py3-none-any.whl", "kernel", "role"),
        ("kernels/index.json", "kernel", "path"),
        ("kernels/x/k-1.0-py3-none-any.whl", "kernel", "path"),
    ],
)
def test_kernels_holds_kernel_wheels_alone(
    tmp_path: Path, cache: Path, path: str, role: str, wrong: str
) -> None:
    """kernels/ is the tool's wheelhouse on the node: its index is written there, never unpacked."""
    body = manifest()
    body["members"].append({"path": path, "sha256": sha(b"k"), "size": 1, "role": role})
    fields = invalid_fields(bundle(tmp_path / "b.tar", body), tmp_path / "env")
    assert fields == [f"members[{path!r}].{wrong}"]
    assert unpacked_files(cache) == []


def test_a_member_of_another_size_is_refused_before_it_is_read(tmp_path: Path, cache: Path) -> None:
    body = manifest()
    body["members"][1]["size"] = 10
    data = refused_member(bundle(tmp_path / "b.tar", body), tmp_path / "env")
    assert data == {"problem": "size", "members": ["artifacts/a-1.0-py3-none-any.whl"]}
    assert not any("a-1.0" in f for f in unpacked_files(cache))


def test_a_sparse_member_is_refused_not_written_out(tmp_path: Path, cache: Path) -> None:
    """GNU tar's sparse member: 2 GiB declared, 10 KiB of archive."""
    work = tmp_path / "tar"
    work.mkdir()
    body = manifest()
    body["members"].append({"path": "big", "sha256": "0" * 64, "size": 2 << 30, "role": "artifact"})
    (work / "manifest.json").write_text(json.dumps(body), encoding="utf-8")
    (work / "lockfile").mkdir()
    (work / "lockfile" / "cpu.lock.yaml").write_bytes(LOCK_BODY)
    with (work / "big").open("wb") as big:
        big.truncate(2 << 30)
    archive = tmp_path / "sparse.tar"
    subprocess.run(
        [
            "tar",
            "--sparse",
            "--format=gnu",
            "-cf",
            str(archive),
            "-C",
            str(work),
            "manifest.json",
            "lockfile/cpu.lock.yaml",
            "big",
        ],
        check=True,
    )
    assert archive.stat().st_size < 1 << 20
    assert refused_member(archive, tmp_path / "env") == {
        "problem": "not-listed",
        "members": ["big"],
    }
    assert not any(f.endswith("big") or "big." in f for f in unpacked_files(cache))


def test_a_link_member_is_refused(tmp_path: Path, cache: Path) -> None:
    body = manifest()
    body["members"].append({"path": "link", "sha256": "0" * 64, "size": 0, "role": "artifact"})
    archive = bundle(tmp_path / "b.tar", body)
    with tarfile.open(archive, "a") as tar:
        info = tarfile.TarInfo("link")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    assert refused_member(archive, tmp_path / "env") == {
        "problem": "not-listed",
        "members": ["link"],
    }


def test_a_cut_short_bundle_is_refused_and_leaves_no_part_file(tmp_path: Path, cache: Path) -> None:
    whole = bundle(tmp_path / "whole.tar", manifest())
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole.read_bytes()[: 512 * 6 + 20_000])  # midway through the artifact
    assert refused_member(cut, tmp_path / "env") == {"problem": "cut-short", "members": []}
    assert not any(f.endswith(".part") for f in unpacked_files(cache))


def test_a_cut_short_or_oversized_manifest_is_bad_input(tmp_path: Path, cache: Path) -> None:
    whole = bundle(tmp_path / "whole.tar", manifest())
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole.read_bytes()[:600])  # inside manifest.json
    code, err = install(cut, tmp_path / "env")
    assert code == EXIT_BAD_INPUT, err
    assert str(cut) in err and "copy it again" in err
    big = bundle(tmp_path / "big.tar", manifest(created_by=" " * (17 << 20)), files={})
    code, err = install(big, tmp_path / "env")
    assert code == EXIT_BAD_INPUT, err
    assert "more than a manifest may be" in err


def test_a_fifo_named_as_the_bundle_is_bad_input_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "bundle.tar"
    os.mkfifo(fifo)
    done = subprocess.run(
        tool_argv("--bundle", fifo, "--profile", "cpu", "--prefix", tmp_path / "env"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert f"{fifo}: not a bundle file" in done.stderr


def test_bundle_to_a_place_it_cannot_write_is_bad_input_before_any_download(
    tmp_path: Path,
) -> None:
    done = invoke(["bundle", "--lockfile", str(CPU_LOCK), "--output", "/proc/version"])
    assert done.code == EXIT_BAD_INPUT, done.err
    assert "--output /proc/version: cannot write there" in done.err
