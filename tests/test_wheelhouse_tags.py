"""A wheel is filed in a wheelhouse only under a key its own tags and contents allow: `wheelhouse
add` refuses a pure-Python wheel, a wheel of another Python or platform, and one with no compiled
extension module (or one built for another Python) under a kernel key, naming the file and the
field, exit 2, nothing written; `wheelhouse check` names such a wheel an index already lists
(filed by hand, or by an older tool), exit 2, for a folder and for an index URL alike.

The wheels are real zip archives in the wheel layout; a kernel's holds the bytes of a real ELF
extension module of this host's Python (tests/tinyenv.kernel_wheel).
"""

from __future__ import annotations

import _json
import json
import zipfile
from pathlib import Path

import pytest
from loopback import base_url, serve
from scaffold import run
from tinyenv import kernel_wheel, publish_wheel

from verl_bootstrap.errors import EXIT_BAD_INPUT, EXIT_OK
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.wheelhouse import Entry, index_text
from verl_bootstrap.kernels.wheeltags import contradictions
from verl_bootstrap.paths import file_sha256

KEY = "torch=2.11.0,cuda=13.0,cxx11abi=TRUE,python=cp312,platform=linux_x86_64"
KEYED = BuildKey.from_mapping(dict(pair.split("=") for pair in KEY.split(",")))


def add(wheel: Path, house: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, out, err = run(
        ["wheelhouse", "add", str(wheel), "--key", KEY, "--wheelhouse", str(house)], capsys
    )
    return code, out + err


def test_a_pure_python_wheel_under_a_kernel_key_is_refused_naming_its_tags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pure = publish_wheel(tmp_path / "wheels", "flash_attn", "2.8.3")  # py3-none-any
    house = tmp_path / "house"
    code, text = add(pure, house, capsys)
    assert code == EXIT_BAD_INPUT, text
    assert f"{pure.name}: tags: py3-none-any is a pure-Python wheel, which no kernel key fits" in (
        text
    )
    assert not house.exists()  # nothing written where a lab reads
    code, text = run(["wheelhouse", "add", str(pure), "--key", KEY, "--dry-run"], capsys)[:2]
    assert code == EXIT_BAD_INPUT  # a dry run checks the wheel too


@pytest.mark.parametrize(
    ("tags", "said"),
    [
        (("cp311", "linux_x86_64"), "python: the key says cp312, its tags say cp311"),
        (("cp312", "linux_aarch64"), "platform: the key says linux_x86_64, its tags say "),
    ],
)
def test_a_wheel_of_another_python_or_platform_is_refused_naming_the_field(
    tags: tuple[str, str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python, platform = tags
    wheel = kernel_wheel(tmp_path, "flash_attn", "2.8.3", python=python, platform=platform)
    code, text = add(wheel, tmp_path / "house", capsys)
    assert code == EXIT_BAD_INPUT, text
    assert f"{wheel.name}: {said}" in text
    assert not (tmp_path / "house").exists()


def test_a_wheel_with_no_compiled_module_or_one_for_another_python_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the tags fit the key, the contents do not: a pure wheel renamed
    pure = publish_wheel(tmp_path / "pure", "flash_attn", "2.8.3")
    renamed = pure.rename(tmp_path / "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl")
    code, text = add(renamed, tmp_path / "house", capsys)
    assert code == EXIT_BAD_INPUT
    assert f"{renamed.name}: contents: no compiled extension module (an ELF .so) inside" in text
    # a compiled module built for CPython 3.11 in a wheel tagged (and keyed) for 3.12
    other = kernel_wheel(tmp_path / "cp311", "flash_attn", "2.8.3", python="cp311")
    mislabelled = other.rename(tmp_path / "cp311" / renamed.name)
    code, text = add(mislabelled, tmp_path / "house", capsys)
    assert code == EXIT_BAD_INPUT
    assert "contents: its extension modules are built for cp311, the key says cp312" in text
    assert not (tmp_path / "house").exists()


def test_a_kernel_wheel_whose_tags_and_contents_fit_is_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "house"
    wheel = kernel_wheel(tmp_path, "flash_attn", "2.8.3")
    code, text = add(wheel, house, capsys)
    assert code == EXIT_OK, text
    assert run(["wheelhouse", "check", "--wheelhouse", str(house)], capsys)[0] == EXIT_OK
    # manylinux and the stable ABI of an older Python fit a linux_x86_64, cp312 key too
    stable = tmp_path / "te-1.0-cp39-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(stable, "w") as archive:
        archive.writestr("te/_C.abi3.so", Path(_json.__file__).read_bytes())
    assert contradictions(stable, KEYED) == []


def _index_listing(house: Path, wheel: Path) -> None:
    """`wheel` filed in `house` under KEY by hand (as a lab mate, or an older tool, did)."""
    house.mkdir(parents=True, exist_ok=True)
    (house / wheel.name).write_bytes(wheel.read_bytes())
    entry = Entry(wheel.name, "flash_attn", "2.8.3", file_sha256(wheel), KEYED)
    (house / "index.json").write_text(index_text([entry]), encoding="utf-8")


def test_check_names_a_pure_wheel_an_index_already_files_under_a_kernel_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = tmp_path / "house"
    pure = publish_wheel(tmp_path / "wheels", "flash_attn", "2.8.3")
    _index_listing(house, pure)
    code, out, _ = run(["wheelhouse", "check", "--wheelhouse", str(house)], capsys)
    assert code == EXIT_BAD_INPUT
    assert "1 wheel(s), 1 problem(s)" in out
    assert f"{pure.name}: tags: py3-none-any is a pure-Python wheel" in out
    code, out, _ = run(["wheelhouse", "check", "--wheelhouse", str(house), "--json"], capsys)
    body = json.loads(out)
    assert code == EXIT_BAD_INPUT and body["ok"] is False
    assert body["misfiled"] and body["misfiled"][0].startswith(f"{pure.name}: tags:")
    # served over http (a lab's read-only wheelhouse URL): the same finding
    server = serve(house)
    try:
        code, out, _ = run(["wheelhouse", "check", "--wheelhouse", base_url(server)], capsys)
    finally:
        server.shutdown()
    assert code == EXIT_BAD_INPUT and f"{pure.name}: tags: py3-none-any" in out
