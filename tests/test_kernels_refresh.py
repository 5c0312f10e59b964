"""`kernels coverage --refresh` against loopback sources laid out as the real ones are: an index
page per distribution (verl's wheelhouse), a published Markdown list of release assets (the
community wheelhouse's doc/packages.md), and release assets answering HEAD (flash-attn's own)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from loopback import base_url, serve

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_STEP_FAILED
from verl_bootstrap.kernels.coverage import coverage
from verl_bootstrap.kernels.record import load_record, record_path
from verl_bootstrap.kernels.refresh import refresh_record

COMMUNITY = "owner/prebuilt/releases/download"
OFFICIAL = "Dao/flash/releases/download/v2.8.3"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A loopback host serving `root`, and its base URL."""
    root = tmp_path / "served"
    root.mkdir()
    server = serve(root)
    yield root, base_url(server)
    server.shutdown()


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: a wheel's bytes are not read


def _profiles(folder: Path, base: str) -> Path:
    """A one-profile folder: torch 2.11 + cu130, flash-attn 2.8.3 with the three sources."""
    stages = [
        {"id": "torch", "packages": ["torch==2.11.0"]},
        {
            "id": "flash-attn",
            "packages": ["flash-attn==2.8.3"],
            "kernel": {
                "distribution": "flash-attn",
                "sources": [
                    {
                        "id": "official",
                        "trust": "upstream",
                        "release": f"{base}/{OFFICIAL}/flash_attn-"
                        "{version}+cu{cuda_major}torch{torch_minor}cxx11abi{cxx11abi}-{python}-{python}-"
                        "{platform}.whl",
                    },
                    {
                        "id": "verl-wheelhouse",
                        "trust": "project",
                        "index": f"{base}/simple/",
                        "key": {"torch": "2.11.0", "cuda": "13.0", "cxx11abi": "TRUE"},
                    },
                    {
                        "id": "community",
                        "trust": "community",
                        "key": {"cxx11abi": "TRUE"},
                        "release": f"{base}/{COMMUNITY}/{{tag}}/flash_attn-{{version}}+"
                        "{cuda_tag}torch{torch_minor}-{python}-{python}-{platform}.whl",
                    },
                ],
            },
        },
    ]
    profile = {
        "schema_version": 1,
        "name": "gpu",
        "python": {"requires": ">=3.12,<3.13", "prefer": "3.12"},
        "cuda_variants": {"cu130": {"cuda": "13.0", "min_driver": "580"}},
        "stages": stages,
        "verify": {"imports": ["flash_attn"], "gpu_smoke": False, "bf16": False},
    }
    folder.mkdir()
    (folder / "gpu.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return folder


def test_refresh_asks_each_source_and_rewrites_the_recorded_lists(
    host: tuple[Path, str], tmp_path: Path
) -> None:
    root, base = host
    x86 = "flash_attn-2.8.3+cu130torch2.11-cp312-cp312-linux_x86_64.whl"
    arm = "flash_attn-2.8.3+cu130torch2.11-cp312-cp312-linux_aarch64.whl"
    old = "flash_attn-2.7.4+cu130torch2.11-cp312-cp312-linux_x86_64.whl"  # a version no stage pins
    for name in (x86, arm, old):
        _touch(root / COMMUNITY / "v0.9.4" / name)
    listing = root / "packages.md"
    listing.write_text(
        "".join(
            f"| 3.12 | [Download1(v0.9.4)]({base}/{COMMUNITY}/v0.9.4/{n}) |\n"
            for n in (x86, arm, old)
        )
    )
    verl = "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    _touch(root / "assets" / verl)
    page = root / "simple" / "flash-attn" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../assets/{verl}#sha256=00">{verl}</a>\n')
    torch28 = "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    _touch(root / OFFICIAL / torch28)  # the recorded asset is still there; the other is gone
    profiles = _profiles(tmp_path / "profiles", base)
    path = record_path(profiles / "gpu.yaml")
    path.parent.mkdir()
    gone = (
        f"{base}/{OFFICIAL}/flash_attn-2.8.3+cu12torch2.7cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    )
    path.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "sources": {
                    "official": {
                        "recorded": "2026-01-01",
                        "from": "its workflow",
                        "wheels": [f"{base}/{OFFICIAL}/{torch28}", gone],
                    },
                    "community": {
                        "recorded": "2026-01-01",
                        "from": "its list",
                        "list": f"{base}/packages.md",
                        "wheels": [],
                    },
                },
            }
        )
    )
    day = dt.date(2026, 12, 4)
    notes = refresh_record(path, load_record(path), search=profiles, today=day).notes
    record = load_record(path)
    assert record.sources["community"].wheels == (
        f"{base}/{COMMUNITY}/v0.9.4/{x86}",
        f"{base}/{COMMUNITY}/v0.9.4/{arm}",
    )  # the list's wheels of the pinned version for the shipped platforms, in its order
    assert record.sources["community"].list == f"{base}/packages.md"
    assert record.sources["verl-wheelhouse"].wheels == (f"{base}/assets/{verl}",)
    assert record.sources["official"].wheels == (f"{base}/{OFFICIAL}/{torch28}",)  # 404 dropped
    assert all(s.recorded == day for s in record.sources.values())
    assert "community: 2 wheel(s), 2 new, 0 gone" in notes
    assert "official: 1 wheel(s), 0 new, 1 gone" in notes
    # the table is computed from the refreshed lists: verl's wheel for x86_64, community's for arm
    rows = {r.platform: r for r in coverage(record, search=profiles)}
    assert rows["linux_x86_64"].source == "verl-wheelhouse"
    assert rows["linux_aarch64"].source == "community" and rows["linux_aarch64"].wheel
    assert rows["linux_aarch64"].wheel.endswith(arm)


def test_a_source_that_does_not_answer_keeps_its_recorded_list(tmp_path: Path) -> None:
    profiles = _profiles(tmp_path / "profiles", "http://127.0.0.1:9")  # nothing listens there
    path = record_path(profiles / "gpu.yaml")
    path.parent.mkdir()
    kept = "http://127.0.0.1:9/simple/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    path.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "sources": {
                    "verl-wheelhouse": {
                        "recorded": "2026-01-01",
                        "from": "its index",
                        "wheels": [kept],
                    },
                },
            }
        )
    )
    refreshed = refresh_record(path, load_record(path), search=profiles)
    notes = refreshed.notes
    assert any(n.startswith("verl-wheelhouse: not refreshed (") for n in notes), notes
    assert "verl-wheelhouse" in refreshed.failed
    record = load_record(path)
    assert record.sources["verl-wheelhouse"].wheels == (kept,)
    assert record.sources["verl-wheelhouse"].recorded == dt.date(2026, 1, 1)


def test_offline_a_refresh_keeps_every_recorded_list_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No network: the release assets' HEADs get no answer, which is not "gone"."""
    dead = "http://127.0.0.1:9"  # nothing listens there
    profiles = _profiles(tmp_path / "profiles", dead)
    path = record_path(profiles / "gpu.yaml")
    path.parent.mkdir()
    asset = (
        f"{dead}/{OFFICIAL}/flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    )
    path.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "sources": {
                    "official": {
                        "recorded": "2026-01-01",
                        "from": "its workflow",
                        "wheels": [asset],
                    }
                },
            }
        )
    )
    code = cli.main(["kernels", "coverage", "--refresh", "--record", str(path)])
    _, said = capsys.readouterr()
    assert code == EXIT_STEP_FAILED
    assert "official: not refreshed (" in said and "did not answer" in said
    assert "could not refresh official, verl-wheelhouse (its recorded list is kept)" in said
    assert load_record(path).sources["official"].wheels == (asset,)
    assert "official: 0 wheel(s)" not in said
    assert load_record(path).sources["official"].recorded == dt.date(2026, 1, 1)


def test_a_dry_run_refresh_shows_the_fresh_table_and_writes_nothing(
    host: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, base = host
    verl = "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    _touch(root / "assets" / verl)
    page = root / "simple" / "flash-attn" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="../../assets/{verl}#sha256=00">{verl}</a>\n')
    profiles = _profiles(tmp_path / "profiles", base)
    path = record_path(profiles / "gpu.yaml")
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"schema_version": 1, "sources": {}}))
    before = path.read_bytes()
    argv = ["kernels", "coverage", "--refresh", "--dry-run", "--record", str(path), "--json"]
    cli.main(argv)
    body = json.loads(capsys.readouterr().out)
    assert path.read_bytes() == before  # nothing written
    assert body["dry_run"] is True
    x86 = next(r for r in body["rows"] if r["platform"] == "linux_x86_64")
    assert x86["source"] == "verl-wheelhouse" and x86["wheel"].endswith(verl)
