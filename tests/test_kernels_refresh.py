"""`kernels coverage --refresh` against loopback sources laid out as the real ones are: an index
page per distribution (verl's wheelhouse, as static HTML; an index that answers PEP 691 JSON to
a client asking for it), a published Markdown list of release assets (the community
wheelhouse's doc/packages.md), and release assets answering HEAD (flash-attn's own)."""

from __future__ import annotations

import datetime as dt
import functools
import http.server
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
import yaml
from loopback import Server, base_url, serve

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_STEP_FAILED
from verl_bootstrap.kernels.coverage import coverage
from verl_bootstrap.kernels.indexpage import JSON_TYPE, list_wheels, read_html
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


class _Negotiating(http.server.SimpleHTTPRequestHandler):
    """A PEP 691 index: a folder's index.json, as JSON, to a client whose Accept asks for it;
    anything else as a static server serves it (no index.html here: a 404)."""

    def send_head(self) -> io.BytesIO | BinaryIO | None:
        page = Path(self.translate_path(self.path)) / "index.json"
        if JSON_TYPE not in self.headers.get("Accept", "") or not page.is_file():
            return super().send_head()
        body = page.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", f"{JSON_TYPE}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Vary", "Accept")
        self.end_headers()
        return io.BytesIO(body)

    def log_message(self, *args: object) -> None:
        """No access log on the test's stderr."""


@pytest.fixture
def json_host(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A loopback host that answers JSON where a folder has an index.json, and its base URL."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_Negotiating, directory=str(root))
    server = Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
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


def _json_page(root: Path, body: object) -> None:
    """verl's wheelhouse's page of flash-attn, as an index serving PEP 691 JSON has it."""
    page = root / "simple" / "flash-attn" / "index.json"
    page.parent.mkdir(parents=True)
    page.write_text(json.dumps(body) if not isinstance(body, str) else body)


def _empty_record(profiles: Path, sources: dict[str, object] | None = None) -> Path:
    path = record_path(profiles / "gpu.yaml")
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"schema_version": 1, "sources": sources or {}}))
    return path


def test_an_index_that_answers_json_is_read_as_pep_691(
    json_host: tuple[Path, str], tmp_path: Path
) -> None:
    """The page exists only as JSON (no index.html): only a client asking for JSON finds it.
    Its file URLs are resolved against the page, its sdist and hashes left out."""
    root, base = json_host
    verl = "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    _touch(root / "assets" / verl)
    files = [
        {"filename": "flash_attn-2.8.3.tar.gz", "url": "../../assets/flash_attn-2.8.3.tar.gz"},
        {"filename": verl, "url": f"../../assets/{verl}", "hashes": {"sha256": "00"}},
    ]
    _json_page(root, {"meta": {"api-version": "1.1"}, "name": "flash-attn", "files": files})
    profiles = _profiles(tmp_path / "profiles", base)
    path = _empty_record(profiles)
    notes = refresh_record(path, load_record(path), search=profiles).notes
    assert "verl-wheelhouse: 1 wheel(s), 1 new, 0 gone" in notes
    assert load_record(path).sources["verl-wheelhouse"].wheels == (f"{base}/assets/{verl}",)
    rows = {r.platform: r for r in coverage(load_record(path), search=profiles)}
    assert rows["linux_x86_64"].source == "verl-wheelhouse"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            {"meta": {"api-version": "2.0"}, "files": []},
            "speaks simple API 2.0; this tool reads 1.x",
        ),
        ('{"meta": {"api-version": "1.0"}, "files": [', "is not a PEP 691 project page"),
        ({"meta": {"api-version": "1.0"}, "files": [{"url": "a.whl"}]}, "filename"),
        ("[" * 100_000, "nested deeper than"),
    ],
    ids=["a-newer-major-version", "cut-midway", "a-file-without-a-name", "nested-100000-deep"],
)
def test_a_json_page_that_cannot_be_trusted_keeps_the_recorded_list(
    json_host: tuple[Path, str], tmp_path: Path, body: object, said: str
) -> None:
    """A JSON page of another version or shape is not "0 wheels": the source is not refreshed."""
    root, base = json_host
    _json_page(root, body)
    profiles = _profiles(tmp_path / "profiles", base)
    kept = f"{base}/assets/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    recorded = {"recorded": "2026-01-01", "from": "its index", "wheels": [kept]}
    path = _empty_record(profiles, {"verl-wheelhouse": recorded})
    refreshed = refresh_record(path, load_record(path), search=profiles)
    note = next(n for n in refreshed.notes if n.startswith("verl-wheelhouse:"))
    assert note.startswith("verl-wheelhouse: not refreshed (") and said in note, note
    assert note.endswith("the recorded list is kept")
    assert "verl-wheelhouse" in refreshed.failed
    assert load_record(path).sources["verl-wheelhouse"].wheels == (kept,)


def test_an_html_page_is_read_by_its_anchors_not_by_its_text() -> None:
    """PEP 503 HTML as real indexes write it: quoted either way or not at all, fragments,
    relative and absolute links, upper-case tags; a wheel named only in text is no link."""
    page = "http://127.0.0.1:1/simple/flash-attn/"
    html = (
        "<!DOCTYPE html><html><body>\n"
        '<A HREF="../../a/one-1.0-py3-none-any.whl#sha256=ab">one</A>\n'
        "<a href='http://127.0.0.1:2/two-1.0-py3-none-any.whl' data-requires-python='&gt;=3.9'>"
        "two</a>\n"
        "<a href=three-1.0-py3-none-any.whl>three</a>\n"
        '<a href="four-1.0.tar.gz">an sdist</a> <a>no href</a>\n'
        "<p>see five-1.0-py3-none-any.whl</p> <!-- <a href='six-1.0-py3-none-any.whl'> -->\n"
        "</body></html>"
    )
    assert read_html(page, html) == [
        "http://127.0.0.1:1/a/one-1.0-py3-none-any.whl",
        "http://127.0.0.1:2/two-1.0-py3-none-any.whl",
        "http://127.0.0.1:1/simple/flash-attn/three-1.0-py3-none-any.whl",
    ]


def test_a_published_list_served_as_html_is_read_by_its_anchors(
    host: tuple[Path, str],
) -> None:
    """A list a pages site renders to HTML: its anchors, not its Markdown (none is left)."""
    root, base = host
    wheel = "flash_attn-2.8.3+cu130torch2.11-cp312-cp312-linux_x86_64.whl"
    (root / "packages.html").write_text(
        f'<table><tr><td><a href="{COMMUNITY}/v0.9.4/{wheel}">Download</a></td></tr>'
        f"<tr><td>[not a link]({base}/x-1.0-py3-none-any.whl)</td></tr></table>"
    )
    assert list_wheels(f"{base}/packages.html") == [f"{base}/{COMMUNITY}/v0.9.4/{wheel}"]
