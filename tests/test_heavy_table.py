"""The heavy tier's table renderer (bench/heavy_table.py, for docs/heavy-tier.md).

Fed a results file of its own shape."""

from __future__ import annotations

from bench.heavy_table import render


def _row(**fields: object) -> dict[str, object]:
    base = {
        "profile": "megatron",
        "variant": "cu130",
        "ref": "v0.9.1",
        "python": "3.12",
        "result": "passed, partly",
        "seconds": 90.8,
        "download_bytes": 4_400_000_000,
        "env_bytes": 10_000_000_000,
        "not_provable": {},
        "failures": [],
    }
    return {**base, **fields}


def test_each_row_says_its_date_result_and_what_was_not_provable() -> None:
    rows = [
        _row(not_provable={"stage flash-attn (flash-attn)": "source build | sdist only"}),
        _row(
            profile="sglang",
            date="2026-11-30",
            result="FAILED",
            failures=["uv pip check: x"],
            seconds=None,
            download_bytes=None,
            env_bytes=None,
        ),
    ]
    lines = render({"date": "2026-12-02", "host": "Linux x86_64", "rows": rows}).splitlines()
    assert lines[2].startswith("| date | profile | variant | verl | python | result |")
    assert lines[4] == (
        "| 2026-12-02 | megatron | cu130 | v0.9.1 | 3.12 | passed, partly; note 1 | "
        "1 min 31 s | 4.4 GB | 10.0 GB |"
    )
    assert lines[5] == (
        "| 2026-11-30 | sglang | cu130 | v0.9.1 | 3.12 | FAILED; note 2 | — | — | — |"
    )
    assert lines[6:] == [
        "",
        "1. not provable here: stage flash-attn (flash-attn): source build | sdist only",
        "2. failed: uv pip check: x",
    ]


def test_rows_sharing_a_reason_share_its_note() -> None:
    why = {"import flash_attn": "needs stage flash-attn, not built here"}
    rows = [_row(not_provable=why), _row(variant="cu128", not_provable=why), _row(variant="cpu")]
    lines = render({"date": "2026-12-03", "host": "h", "rows": rows}).splitlines()
    assert [line.split(" | ")[5] for line in lines[4:7]] == [
        "passed, partly; note 1",
        "passed, partly; note 1",
        "passed, partly",
    ]
    assert lines[7:] == [
        "",
        "1. not provable here: import flash_attn: needs stage flash-attn, not built here",
    ]


def test_an_index_url_quoted_in_a_failure_is_not_written_into_the_table() -> None:
    failure = "refused (exit 3): index:default (https://mirror.example.invalid/simple): no answer"
    table = render({"date": "2026-12-03", "host": "h", "rows": [_row(failures=[failure])]})
    assert "mirror.example.invalid" not in table
    assert "index:default (<configured index>): no answer" in table


def test_locked_rows_get_their_own_table_with_the_route_and_verify_checks() -> None:
    route = "from lockfile lockfiles/fsdp/cu130-linux-64.lock.yaml less the stages named"
    checks = {"import verl": "ok", "uv pip check": "warn", "gpu smoke test": "skipped"}
    locked = _row(
        profile="fsdp",
        lockfile="lockfiles/fsdp/cu130-linux-64.lock.yaml",
        route=route,
        checks={**checks, "import flash_attn": "left out", "import numba": "fail"},
        not_provable={"gpu smoke test": "no NVIDIA driver"},
        failures=["import numba: ImportError: Numba needs NumPy 2.4 or less"],
        result="FAILED",
    )
    lines = render({"date": "2026-12-07", "host": "h", "rows": [_row(), locked]}).splitlines()
    assert lines[4].startswith("| 2026-12-07 | megatron | cu130 | v0.9.1 | 3.12 | passed, partly |")
    assert lines[6].startswith("Committed locks installed, 2026-12-07 on h")
    assert lines[8] == (
        "| date | profile | lockfile | route | result | time | download | env size | checks |"
    )
    assert lines[10] == (
        "| 2026-12-07 | fsdp | `lockfiles/fsdp/cu130-linux-64.lock.yaml` | note 1 | "
        "FAILED; notes 2, 3 | 1 min 31 s | 4.4 GB | 10.0 GB | "
        "2 passed (1 with a warning), 1 skipped, 1 of a stage left out, 1 failed |"
    )
    assert lines[11:] == [
        "",
        f"1. {route}",
        "2. not provable here: gpu smoke test: no NVIDIA driver",
        "3. failed: import numba: ImportError: Numba needs NumPy 2.4 or less",
    ]
