"""Files a lab mate hands over (a wheelhouse index, an env's record) cannot drive the terminal,
and a wheelhouse URL is never taken for a folder.

Each case runs the real CLI in-process: bad input ends in exit 2 with a message naming the file
and the field, and nothing raw (an escape sequence, a line break) reaches the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scaffold import run

from verl_bootstrap.cli.output import out, paint, printable, set_color

ESC = "\x1b"
KEY = {
    "torch": "2.11.0",
    "cuda": "13.0",
    "cxx11abi": True,
    "python": "cp312",
    "platform": "linux_x86_64",
}
KEY_FLAG = "torch=2.11.0,cuda=13.0,cxx11abi=TRUE,python=cp312,platform=linux_x86_64"


def _index(folder: Path, key: dict[str, object]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    row = {"file": "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl", "sha256": "0" * 64, "key": key}
    (folder / "index.json").write_text(json.dumps({"wheels": [row]}))
    return folder


def test_an_index_key_with_an_escape_and_a_line_break_is_skipped_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One lab mate's bad entry is skipped with a note (the rest of a shared index still
    serves everyone), and `wheelhouse check` fails naming it."""
    house = _index(tmp_path / "wh", {**KEY, "torch": f"2.11.0{ESC}[2J\nadded fake-1.0.whl"})
    code, out, err = run(["wheelhouse", "list", "--wheelhouse", str(house)], capsys)
    text = out + err
    assert code == 0 and "0 wheel(s)" in text
    assert "skipped an entry of the wheelhouse index" in text
    assert "index.json: wheels[0].key.torch: holds a line break or control character" in text
    assert ESC not in text and "\nadded fake" not in text
    code, out, err = run(["wheelhouse", "check", "--wheelhouse", str(house)], capsys)
    text = out + err
    assert code == 1 and "wheels[0].key.torch: holds a line break" in text
    assert ESC not in text


def test_a_record_profile_name_with_control_characters_is_refused_by_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "env"
    (prefix / ".verl-bootstrap").mkdir(parents=True)
    state = {
        "version": 1,
        "steps": {},
        "protected": {},
        "last_run": {},
        "made": [],
        "record": {"options": {}, "profile_name": f"cpu{ESC}]0;owned\a\nverl ok"},
    }
    (prefix / ".verl-bootstrap" / "state.json").write_text(json.dumps(state))
    code, out, err = run(["info", "--prefix", str(prefix)], capsys)
    text = out + err
    assert code == 2
    assert "field 'record.profile_name' holds a line break or control character" in text
    assert ESC not in text and "\a" not in text


def test_the_printing_layer_shows_control_characters_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out(f"name {ESC}[31mred\rover\x9b2J\x7f\tkept\nnext line")
    shown = capsys.readouterr().out
    assert shown == "name \\x1b[31mred\\x0dover\\x9b2J\\x7f\tkept\nnext line\n"
    assert printable("plain: ok") == "plain: ok"


@pytest.mark.parametrize(
    "mark",
    ["\u202e", "\u202a", "\u202d", "\u2066", "\u2067", "\u2069", "\u200f", "\u061c", "\u2028"],
)
def test_the_printing_layer_shows_bidirectional_controls_escaped(
    mark: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """U+202E RIGHT-TO-LEFT OVERRIDE (and the embeddings, isolates and marks) would show the
    rest of the line in another order than it has; a line separator would break it."""
    out(f"env /tmp/{mark}hsab.exe")
    assert capsys.readouterr().out == f"env /tmp/\\u{ord(mark):04x}hsab.exe\n"
    assert printable("caf\u00e9 \u2713") == "caf\u00e9 \u2713"  # other text stays as it is


def test_text_from_elsewhere_cannot_forge_the_printing_layers_colour_marks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`paint` marks a colour with private-use characters that become an escape sequence only
    when printed: a node's name holding them (8: concealed text) stays as it is."""
    set_color("always")
    try:
        out("node n1\ue0008\ue001 and what follows")
        out(paint("ok", "ok"))
    finally:
        set_color("auto")
    forged, painted = capsys.readouterr().out.splitlines()
    assert "\x1b" not in forged and forged == "node n1\ue0008\ue001 and what follows"
    assert painted == "\x1b[32mok\x1b[0m"  # the tool's own colour still shows


def test_a_path_with_a_bidirectional_override_is_shown_escaped_in_a_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "env\u202etxt.exe"
    code, shown, said = run(["plan", "--profile", "cpu", "--prefix", str(prefix)], capsys)
    assert code == 0, said
    assert f"{tmp_path}/env\\u202etxt.exe" in shown
    assert "\u202e" not in shown + said


@pytest.mark.parametrize("url", ["https://user:pw@host.invalid/wh", "s3://user:pw@bucket/wh"])
def test_wheelhouse_add_refuses_a_url_and_makes_no_folder(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    wheel = tmp_path / "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(b"not really a wheel")
    code, out, err = run(
        ["wheelhouse", "add", str(wheel), "--key", KEY_FLAG, "--wheelhouse", url], capsys
    )
    text = out + err
    assert code == 2 and "pw" not in text
    assert "read, never written" in text or "a URL the tool cannot read" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel.name]  # no https:/ folder


@pytest.mark.parametrize(
    ("field", "value"),
    [("cuda", "13.0 && rm -rf ~"), ("python", "py3"), ("torch", "latest"), ("cxx11abi", "maybe")],
)
def test_an_index_key_field_without_its_shape_is_skipped_by_name(
    field: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = _index(tmp_path / "wh", {**KEY, field: value})
    code, out, err = run(["wheelhouse", "list", "--wheelhouse", str(house)], capsys)
    text = out + err
    assert code == 0 and "0 wheel(s)" in text
    assert f"index.json: wheels[0].key.{field}: {value!r} is not" in text
    code, out, err = run(["wheelhouse", "check", "--wheelhouse", str(house)], capsys)
    text = out + err
    assert code == 1 and f"wheels[0].key.{field}: {value!r} is not" in text


def test_a_record_variant_without_its_shape_is_refused_by_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "env"
    (prefix / ".verl-bootstrap").mkdir(parents=True)
    state = {
        "version": 1,
        "steps": {},
        "protected": {},
        "last_run": {},
        "made": [],
        "record": {"options": {}, "profile_name": "cpu", "variant": "cpu $(id)"},
    }
    (prefix / ".verl-bootstrap" / "state.json").write_text(json.dumps(state))
    code, out, err = run(["info", "--prefix", str(prefix)], capsys)
    text = out + err
    assert code == 2 and "field 'record.variant' is 'cpu $(id)', not a variant" in text
