"""Invalid profiles are refused before anything runs, with file:line, the field, and the fix.

Each case is a scenario folder under tests/data/profiles/invalid-<case>/, copied into tmp_path.
Every case goes through `profiles validate`, `plan` and the install command itself: all three
exit 2 with the same message, and none of them creates the --prefix folder.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from verl_bootstrap import cli
from verl_bootstrap.errors import EXIT_BAD_INPUT, InputError
from verl_bootstrap.profile import list_profiles, load_profile

DATA = Path(__file__).parent / "data" / "profiles"


def clone_case(name: str, tmp_path: Path) -> Path:
    """A copy of tests/data/profiles/<name>/ in tmp_path (tests never touch the repo's files)."""
    return Path(shutil.copytree(DATA / name, tmp_path / name))


@dataclass(frozen=True)
class Case:
    """What a broken profile must say: where (file:line), which field, the problem, the fix."""

    folder: str
    where: str  # "<file>:<line>", the file relative to the case folder
    field: str
    problem: str
    fix: str
    entry: str = "profile.yaml"  # the file handed to the CLI


CASES = [
    Case(
        "invalid-unknown-key-top",
        "profile.yaml:3",
        "colour",
        "unknown key",
        "check its spelling against the profile schema",
    ),
    Case(
        "invalid-unknown-key-stage",
        "profile.yaml:7",
        "stages.1.pakages",
        "unknown key",
        "check its spelling against the profile schema",
    ),
    Case(
        "invalid-wrong-type",
        "profile.yaml:6",
        "stages.0.no_deps",
        "Input should be a valid boolean",
        "(got 'maybe')",
    ),
    Case(
        "invalid-stages-not-a-list", "profile.yaml:3", "stages", "must be a list", "(got 'torch')"
    ),
    Case(
        "invalid-negative-disk",
        "profile.yaml:3",
        "disk_gb",
        "Input should be greater than 0",
        "(got -5)",
    ),
    Case(
        "invalid-missing-schema-version",
        "profile.yaml:1",
        "schema_version",
        "required key is missing",
        "add `schema_version: 1` at the top",
    ),
    Case(
        "invalid-wrong-schema-version",
        "profile.yaml:1",
        "schema_version",
        "must be one of 1 (got 2)",
        "this verl-bootstrap reads profile schema_version 1",
    ),
    Case(
        "invalid-missing-stages",
        "profile.yaml:1",
        "stages",
        "required key is missing",
        "fix the field(s) above",
    ),
    Case(
        "invalid-unknown-stage-kind",
        "profile.yaml:5",
        "stages.0.kind",
        "must be one of 'packages', 'verl-deps', 'script' or 'install-verl'",
        "(got 'conda')",
    ),
    Case(
        "invalid-unknown-backend",
        "profile.yaml:4",
        "env.backend",
        "must be one of 'conda' or 'venv'",
        "(got 'docker')",
    ),
    Case(
        "invalid-extends-cycle",
        "b.yaml:3",
        "extends",
        "'a' makes a cycle: a.yaml -> b.yaml -> a.yaml",
        "remove one of the 'extends' links",
        entry="a.yaml",
    ),
    Case(
        "invalid-extends-missing",
        "profile.yaml:3",
        "extends",
        "no profile named 'no-such-profile'",
        f"profiles that can be extended: {', '.join(list_profiles())}",
    ),
    Case("invalid-extends-not-a-name", "profile.yaml:3", "extends", "must be a profile name", ""),
    Case(
        "invalid-error-in-parent",
        "parent.yaml:8",
        "verify.gpu_smok",
        "unknown key",
        "check its spelling",
    ),
    Case(
        "invalid-stage-before-verl",
        "profile.yaml:7",
        "stages.1.kind",
        "stage(s) flash-attn come before install-verl",
        "move them after it",
    ),
    Case(
        "invalid-unknown-cuda-variant",
        "profile.yaml:9",
        "stages.0.variants.cu126",
        "unknown CUDA variant 'cu126' (declared: cu130)",
        "declare it under 'cuda_variants' or remove it from the stage",
    ),
    Case(
        "invalid-bad-variant-name",
        "profile.yaml:4",
        "cuda_variants.cuda13",
        "'cuda13' is not a CUDA variant",
        "use 'cpu' or 'cuXYZ', e.g. 'cu130'",
    ),
    Case(
        "invalid-duplicate-stage-id",
        "profile.yaml:6",
        "stages.1.id",
        "stage id 'torch' appears twice",
        "stage ids must be unique",
    ),
    Case(
        "invalid-stack-duplicate-stage",
        "profile.yaml:11",
        "stacks.0.stages.1.id",
        "stage id 'torch' appears twice",
        "stage ids must be unique",
    ),
    Case(
        "invalid-reserved-stage-id",
        "profile.yaml:4",
        "stages.0.id",
        "stage id 'verify' is reserved for a built-in step",
        "rename the stage",
    ),
    Case(
        "invalid-bad-stage-id",
        "profile.yaml:4",
        "stages.0.id",
        "'Flash_Attn' is not a stage id",
        "lower-case letters, digits and '-'",
    ),
    Case(
        "invalid-needs-later-stage",
        "profile.yaml:6",
        "stages.0.needs",
        "stage 'trainer' needs 'torch', which is not an earlier stage",
        "stages run in profile order",
    ),
    Case(
        "invalid-needs-later-builtin",
        "profile.yaml:6",
        "stages.0.needs",
        "stage 'torch' needs 'verify', which is not an earlier stage",
        "stages run in profile order",
    ),
    Case(
        "invalid-bad-version-range",
        "profile.yaml:6",
        "stages.0.expect.torch",
        "'=2.13.0' is not a version range",
        "write it like '>=3.10,<3.13'",
    ),
    Case(
        "invalid-bad-python-range",
        "profile.yaml:4",
        "python.requires",
        "'3.10 to 3.12' is not a version range",
        "write it like '>=3.10,<3.13'",
    ),
    Case(
        "invalid-vllm-and-sglang",
        "profile.yaml:7",
        "stages.1.packages",
        "vLLM and SGLang are both installed",
        "use two profiles",
    ),
    Case(
        "invalid-undeclared-index",
        "profile.yaml:6",
        "stages.0.index",
        "index 'pytorch-cpu' is not declared under 'indexes'",
        "fix the field(s) above",
    ),
    Case(
        "invalid-script-without-script",
        "profile.yaml:4",
        "stages.0",
        "a 'script' stage needs 'script'",
        "a path inside verl's checkout",
    ),
    Case(
        "invalid-replaces-without-distribution",
        "profile.yaml:9",
        "stages.0.kernel.sources.0",
        "`replaces` needs `distribution`",
        "fix the field(s) above",
    ),
    Case(
        "invalid-yaml-syntax",
        "profile.yaml:6",
        "invalid YAML",
        "expected ',' or ']'",
        "fix the syntax",
    ),
    Case(
        "invalid-not-a-mapping",
        "profile.yaml:1",
        "a profile must be a YAML mapping",
        "of keys to values",
        "",
    ),
    Case(
        "invalid-empty-file",
        "profile.yaml:1",
        "a profile must be a YAML mapping",
        "of keys to values",
        "",
    ),
]


def expected_lines(case: Case, folder: Path) -> list[str]:
    """The pieces the message must contain, with the real path of the blamed file."""
    where_file, line = case.where.split(":")
    pieces = [f"{folder / where_file}:{line}: {case.field}", case.problem]
    return [p for p in (*pieces, case.fix) if p]


@pytest.mark.parametrize("case", CASES, ids=[c.folder.removeprefix("invalid-") for c in CASES])
def test_an_invalid_profile_is_refused_with_file_line_field_and_fix(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = clone_case(case.folder, tmp_path)
    profile = folder / case.entry
    prefix = tmp_path / "never-created"
    argvs = [
        ["profiles", "validate", str(profile)],
        ["plan", "--profile", str(profile), "--prefix", str(prefix)],
        ["--profile", str(profile), "--prefix", str(prefix), "--backend", "venv"],
    ]
    for argv in argvs:
        assert cli.main(argv) == EXIT_BAD_INPUT, argv
        stderr = capsys.readouterr().err
        assert stderr.startswith("error: "), stderr
        for piece in expected_lines(case, folder):
            assert piece in stderr, f"{argv}: {piece!r} not in:\n{stderr}"
        assert not prefix.exists(), f"{argv} created {prefix}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [case.folder]


def test_every_case_folder_is_covered() -> None:
    folders = {p.name for p in DATA.iterdir() if p.name.startswith("invalid-")}
    assert folders == {c.folder for c in CASES}


def test_the_library_raises_input_error_listing_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "two-problems.yaml"
    bad.write_text(
        "schema_version: 1\n"
        "colour: blue\n"
        "stages:\n"
        "  - id: torch\n"
        "    packages: [torch]\n"
        "    no_deps: maybe\n"
    )
    with pytest.raises(InputError) as raised:
        load_profile(str(bad))
    fields = [(f["file"], f["line"], f["field"]) for f in raised.value.data["fields"]]
    assert sorted(fields) == [(str(bad), 2, "colour"), (str(bad), 6, "stages.0.no_deps")]
    assert raised.value.exit_code == EXIT_BAD_INPUT


def test_a_missing_profile_file_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.yaml"
    assert cli.main(["profiles", "validate", str(missing)]) == EXIT_BAD_INPUT
    assert f"{missing} does not exist" in capsys.readouterr().err
    assert cli.main(["plan", "--profile", str(missing), "--prefix", str(tmp_path / "p")]) == 2
    assert f"profile file {missing} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
