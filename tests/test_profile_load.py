"""Loading profiles: the shipped ones, `extends` merging, names, line tracking, and stacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_bootstrap.errors import InputError
from verl_bootstrap.profile import PROFILES_DIR, list_profiles, load_profile, profile_path
from verl_bootstrap.profile.load import MAX_PROFILE_BYTES
from verl_bootstrap.profile.stacks import apply_stack, supported_refs
from verl_bootstrap.safety.yamlfile import load_yaml

PARENT = """\
schema_version: 1
name: parent
description: the parent
indexes:
  mirror: {url: "https://mirror.invalid/simple", optional: true}
stages:
  - id: torch
    packages: ["torch==2.13.0"]
verify:
  imports: [verl, torch]
  versions: {torch: "==2.13.0"}
  gpu_smoke: false
protected: [torch]
"""


@pytest.mark.parametrize("name", list_profiles())
def test_every_shipped_profile_loads_under_its_own_name(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert profile.schema_version == 1
    assert profile.stages
    assert profile.verify.imports[0] == "verl"
    assert profile.gpu is (name != "cpu")
    assert profile_path(name) == PROFILES_DIR / f"{name}.yaml"


def test_the_cpu_profile_is_venv_cpu_torch_first_and_protects_torch() -> None:
    cpu = load_profile("cpu")
    assert cpu.env.backend == "venv"
    assert list(cpu.cuda_variants) == ["cpu"]
    assert [s.id for s in cpu.stages] == ["torch", "verl-deps", "tests"]
    assert cpu.stages[0].packages == ("torch==2.13.0",)
    assert cpu.stages[1].kind == "verl-deps"
    assert cpu.stages[1].extras == ("verl-core",)
    assert cpu.stages[2].option == "tests"  # only with --with-tests
    assert cpu.protected == ("torch",)
    assert cpu.verl.ref == "v0.9.1"


def test_a_shipped_child_inherits_what_it_does_not_set() -> None:
    parent, child = load_profile("vllm-only"), load_profile("fsdp")
    assert child.env == parent.env
    assert child.cuda_variants == parent.cuda_variants
    assert child.protected == parent.protected
    assert child.verl == parent.verl
    assert [s.id for s in child.stages][:2] == ["engine", "verl-deps"]
    assert "flash-attn" in [s.id for s in child.stages]  # its own stage list, replaced whole
    assert child.extends is None  # merged away


def test_mappings_merge_key_by_key_and_lists_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text(PARENT)
    child = tmp_path / "child.yaml"
    child.write_text(
        "schema_version: 1\n"
        "extends: parent\n"
        "stages:\n"
        "  - id: six\n"
        "    packages: [six]\n"
        "verify:\n"
        "  imports: [six]\n"
    )
    profile = load_profile(str(child))
    assert [s.id for s in profile.stages] == ["six"]  # a list: replaced
    assert profile.verify.imports == ("six",)  # a key the child set
    assert profile.verify.versions == {"torch": "==2.13.0"}  # a key it did not: inherited
    assert profile.verify.gpu_smoke is False
    assert list(profile.indexes) == ["mirror"]
    assert profile.protected == ("torch",)
    assert profile.description == "the parent"


def test_a_child_without_a_name_is_named_after_its_file_not_its_parent(tmp_path: Path) -> None:
    mine = tmp_path / "my-lab.yaml"
    mine.write_text("schema_version: 1\nextends: cpu\nverify: {imports: [yaml]}\n")
    assert load_profile(str(mine)).name == "my-lab"


def test_a_file_beside_the_child_wins_over_a_shipped_profile_of_that_name(tmp_path: Path) -> None:
    (tmp_path / "cpu.yaml").write_text(PARENT.replace("name: parent", "name: local-cpu"))
    child = tmp_path / "child.yaml"
    child.write_text("schema_version: 1\nextends: cpu\n")
    profile = load_profile(str(child))
    assert profile.indexes["mirror"].url == "https://mirror.invalid/simple"  # the local one
    assert profile.name == "child"


def test_a_tmp_profile_can_extend_a_shipped_one(tmp_path: Path) -> None:
    mine = tmp_path / "light.yaml"
    mine.write_text("schema_version: 1\nname: light\nextends: cpu\nverify: {imports: [yaml]}\n")
    profile = load_profile(str(mine))
    assert [s.id for s in profile.stages] == ["torch", "verl-deps", "tests"]
    assert profile.verify.imports == ("yaml",)
    assert profile.verify.versions == {"torch": "==2.13.0"}


def test_a_file_named_after_the_profile_it_extends_extends_the_shipped_one(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "cpu.yaml"  # an edited cpu profile, kept under the shipped one's name
    mine.write_text("schema_version: 1\nextends: cpu\nverl: {repo: /srv/verl}\n")
    profile = load_profile(str(mine))
    assert profile.name == "cpu" and profile.verl.repo == "/srv/verl"
    assert profile.verl.ref == load_profile("cpu").verl.ref  # the rest is the shipped cpu's
    assert [s.id for s in profile.stages] == ["torch", "verl-deps", "tests"]


def test_an_error_in_a_childs_own_stages_points_at_the_child(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text(PARENT)
    child = tmp_path / "child.yaml"
    child.write_text(
        "schema_version: 1\nextends: parent\nstages:\n  - id: six\n    pakages: [six]\n"
    )
    with pytest.raises(InputError) as raised:
        load_profile(str(child))
    (field,) = raised.value.data["fields"]
    assert (field["file"], field["line"], field["field"]) == (str(child), 5, "stages.0.pakages")


def test_an_unknown_profile_name_lists_the_shipped_ones() -> None:
    with pytest.raises(InputError) as raised:
        load_profile("no-such-profile")
    assert raised.value.message == "unknown profile 'no-such-profile'"
    assert ", ".join(list_profiles()) in (raised.value.hint or "")
    assert "or pass a YAML file" in (raised.value.hint or "")


def test_list_profiles_reads_a_folder(tmp_path: Path) -> None:
    for name in ("b", "a"):
        (tmp_path / f"{name}.yaml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert list_profiles(tmp_path) == ["a", "b"]


def test_a_profile_remembers_the_line_of_every_key(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(PARENT)
    located = load_yaml(path, what="profile", max_bytes=MAX_PROFILE_BYTES)
    assert located.lines[("name",)] == (path, 2)
    assert located.lines[("stages", 0)] == (path, 7)
    assert located.lines[("stages", 0, "packages")] == (path, 8)
    assert located.lines[("verify", "versions", "torch")] == (path, 11)


def test_yaml_is_loaded_safely(tmp_path: Path) -> None:
    path = tmp_path / "evil.yaml"
    path.write_text("schema_version: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(InputError) as raised:
        load_profile(str(path))
    assert f"{path}:1: invalid YAML" in raised.value.message


# --- stacks for other verl releases ------------------------------------------------------------

STACKED = (
    PARENT
    + """\
stacks:
  - refs: [v0.8.0]
    python: {requires: ">=3.10,<3.12", prefer: "3.10"}
    stages:
      - id: torch
        packages: ["torch==2.7.1"]
    note: the stack verl 0.8.0 was released with
"""
)


def test_a_stack_replaces_the_fields_it_sets_for_its_refs(tmp_path: Path) -> None:
    path = tmp_path / "stacked.yaml"
    path.write_text(STACKED)
    profile = load_profile(str(path))
    assert supported_refs(profile) == ["v0.9.1", "v0.8.0"]
    assert apply_stack(profile, None) == profile
    old = apply_stack(profile, "v0.8.0")
    assert old.verl.ref == "v0.8.0"
    assert old.stages[0].packages == ("torch==2.7.1",)
    assert old.python.requires == ">=3.10,<3.12"
    assert old.verify == profile.verify  # not set by the stack: kept


def test_a_ref_with_no_stack_is_refused_unless_allowed(tmp_path: Path) -> None:
    path = tmp_path / "stacked.yaml"
    path.write_text(STACKED)
    profile = load_profile(str(path))
    with pytest.raises(InputError) as raised:
        apply_stack(profile, "v0.5.0")
    assert (raised.value.data["ref"], raised.value.data["supported"]) == (
        "v0.5.0",
        ["v0.9.1", "v0.8.0"],
    )
    assert "--allow-unsupported-ref" in (raised.value.hint or "")
    today = apply_stack(profile, "v0.5.0", allow_unsupported=True)
    assert today.verl.ref == "v0.5.0"
    assert today.stages == profile.stages
