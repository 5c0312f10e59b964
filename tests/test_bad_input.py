"""A corpus of bad input, each case run through the real CLI (in-process, for speed).

Every case must end with its exit code (2 for bad input, 3 for a refusal), a message that names
the problem, no traceback, and no file changed outside the tool's own folder. Profiles, site
configs (also fetched by URL), lockfiles, flags and environment variables are all untrusted.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from loopback import base_url, serve
from scaffold import run

REPO = Path(__file__).resolve().parents[1]
GOOD_LOCK = (REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml").read_text()
PROFILE = """schema_version: 1
name: tiny
env: {backend: venv}
cuda_variants: {cpu: {description: no CUDA}}
stages:
  - id: deps
    packages: [cachetools]
verify: {imports: [], gpu_smoke: false}
"""


def bomb(levels: int = 12) -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "schema_version: 1\nbomb:\n" + "\n".join(f"  {line}" for line in lines) + "\n"


def deep(depth: int = 5000) -> str:
    return "schema_version: 1\nx: " + "[" * depth + "]" * depth + "\n"


def first_hash() -> str:
    """The first distribution hash in the committed cpu lockfile (it changes with each re-lock)."""
    found = re.search(r"hashes:\n\s+- ([0-9a-f]{64})", GOOD_LOCK)
    assert found, "the cpu lockfile holds no distribution hash"
    return found[1]


def lock_with(old: str, new: str) -> str:
    assert old in GOOD_LOCK, old
    return GOOD_LOCK.replace(old, new, 1)


FIFO = b"(a named pipe)"  # a file body that makes the case write a FIFO instead


@dataclass(frozen=True)
class Case:
    """One bad input: the files it writes, the command, the environment, what must come out."""

    files: dict[str, str | bytes]
    argv: list[str]
    code: int
    message: str
    env: dict[str, str] = field(default_factory=dict)


def profile_case(body: str | bytes, message: str, **more: str | bytes) -> Case:
    return Case({"p.yaml": body, **more}, ["profiles", "validate", "{t}/p.yaml"], 2, message)


def config_case(body: str | bytes, message: str) -> Case:
    return Case({"c.yaml": body}, ["config", "show", "--config", "{t}/c.yaml"], 2, message)


def lock_case(body: str | bytes, message: str) -> Case:
    argv = ["export", "--format", "requirements", "--lockfile", "{t}/l.yaml"]
    return Case({"l.yaml": body}, [*argv, "--output", "{t}/out"], 2, message)


PLAN = ["plan", "--profile", "cpu", "--python", "/usr/bin/python3"]

CASES: dict[str, Case] = {
    # --- profiles -------------------------------------------------------------------------------
    "profile-binary": profile_case(b"\x7fELF\x02\x01\x00\x00" * 64, "a binary file"),
    "profile-latin1": profile_case("name: caf\xe9\n".encode("latin-1"), "not UTF-8"),
    "profile-utf16": profile_case(PROFILE.encode("utf-16"), "binary file"),
    "profile-alias-bomb": profile_case(bomb(), "alias bomb"),
    "profile-alias-bomb-under-unknown-key": profile_case(PROFILE + bomb()[18:], "alias bomb"),
    "profile-deep-nesting": profile_case(deep(), "nest"),
    "profile-recursive-alias": profile_case("schema_version: 1\na: &a [*a]\n", "refers to itself"),
    "profile-undefined-alias": profile_case("schema_version: 1\na: *nowhere\n", "nowhere"),
    "profile-duplicate-extends": profile_case(
        "schema_version: 1\nextends: cpu\nextends: fsdp\nstages: []\n",
        "duplicate key 'extends' (first at line 2)",
    ),
    "profile-duplicate-packages": profile_case(
        PROFILE.replace("packages: [cachetools]", "packages: [a]\n    packages: [b]"),
        "duplicate key 'packages'",
    ),
    "profile-duplicate-anchor": profile_case(
        "schema_version: 1\na: &x 1\nb: &x 2\n", "defined twice"
    ),
    "profile-no-schema-version": profile_case(
        PROFILE.replace("schema_version: 1\n", ""), "schema_version"
    ),
    "profile-schema-version-2": profile_case(
        PROFILE.replace("version: 1", "version: 2"), "schema_version"
    ),
    "profile-extends-without-version": profile_case(
        "extends: cpu\nname: child\n", "schema_version: required"
    ),
    "profile-a-list": profile_case("- a\n- b\n", "must be a YAML mapping"),
    "profile-empty": profile_case("", "must be a YAML mapping"),
    "profile-bad-syntax": profile_case("schema_version: 1\nstages: [a, b\n", "invalid YAML"),
    "profile-tab-indent": profile_case("schema_version: 1\nstages:\n\t- a\n", "invalid YAML"),
    "profile-python-tag": profile_case(
        "schema_version: 1\nx: !!python/object/apply:os.system ['true']\n", "invalid YAML"
    ),
    "profile-two-documents": profile_case(PROFILE + "---\na: 1\n", "more than one YAML document"),
    "profile-mapping-key": profile_case("schema_version: 1\n? [a, b]\n: 1\n", "plain value"),
    "profile-too-large": profile_case("schema_version: 1\n" + "# pad\n" * 200_000, "larger than"),
    "profile-name-traversal": profile_case(
        PROFILE.replace("name: tiny", "name: ../../evil"), "not a profile name"
    ),
    "profile-name-newline": profile_case(
        PROFILE.replace("name: tiny", 'name: "a\\nb"'), "not a profile name"
    ),
    "profile-stage-id-traversal": profile_case(
        PROFILE.replace("id: deps", "id: ../x"), "not a stage id"
    ),
    "profile-script-traversal": profile_case(
        PROFILE.replace("packages: [cachetools]", "kind: script\n    script: ../../../bin/sh"),
        "not a valid script path",
    ),
    "profile-script-absolute": profile_case(
        PROFILE.replace("packages: [cachetools]", "kind: script\n    script: /bin/sh"),
        "not a valid script path",
    ),
    "profile-unknown-key": profile_case(PROFILE + "colour: blue\n", "unknown key"),
    "profile-extends-cycle": profile_case(
        "schema_version: 1\nextends: q\nstages: []\n",
        "makes a cycle",
        **{"q.yaml": "schema_version: 1\nextends: p\nstages: []\n"},
    ),
    "profile-extends-missing": profile_case(
        "schema_version: 1\nextends: nosuch\nstages: []\n", "no profile named 'nosuch'"
    ),
    "profile-missing-file": Case(
        {}, ["profiles", "validate", "{t}/none.yaml"], 2, "does not exist"
    ),
    "profile-a-folder": Case(
        {"d.yaml/x": "x"}, ["profiles", "validate", "{t}/d.yaml"], 2, "is not a regular file"
    ),
    "profile-a-fifo": Case(
        {"p.yaml": FIFO}, ["profiles", "validate", "{t}/p.yaml"], 2, "is not a regular file"
    ),
    "profile-a-fifo-to-plan": Case(
        {"p.yaml": FIFO}, [*PLAN[:2], "{t}/p.yaml"], 2, "is not a regular file"
    ),
    "profile-unknown-name": Case({}, [*PLAN[:2], "nosuch"], 2, "unknown profile 'nosuch'"),
    # --- site configs ---------------------------------------------------------------------------
    "config-binary": config_case(b"\x00\x01\x02" * 100, "binary file"),
    "config-latin1": config_case("schema_version: 1\n# \xe9\n".encode("latin-1"), "not UTF-8"),
    "config-alias-bomb": config_case(bomb(), "alias bomb"),
    "config-deep": config_case(deep(), "nest"),
    "config-duplicate-key": config_case(
        "schema_version: 1\nmirrors: {}\nmirrors: {}\n", "duplicate key 'mirrors'"
    ),
    "config-no-version": config_case("mirrors: {}\n", "schema_version None"),
    "config-version-string": config_case("schema_version: '1'\n", "schema_version '1'"),
    "config-unknown-key": config_case("schema_version: 1\ncolour: blue\n", "colour"),
    "config-a-list": config_case("- 1\n", "a site config is a mapping"),
    "config-unset-variable": config_case(
        "schema_version: 1\nmirrors:\n  pypi:\n    index_url: https://u:${VB_NO_SUCH_VAR}@m.invalid/\n",
        "VB_NO_SUCH_VAR",
    ),
    "config-folder": Case(
        {"cdir/x": "x"}, ["config", "show", "--config", "{t}/cdir"], 2, "is a folder"
    ),
    "config-a-fifo": Case(
        {"c.yaml": FIFO}, ["config", "show", "--config", "{t}/c.yaml"], 2, "not a regular file"
    ),
    "config-dev-zero": Case(
        {}, ["config", "show", "--config", "/dev/zero"], 2, "not a regular file"
    ),
    "config-missing": Case(
        {}, ["config", "show", "--config", "{t}/none.yaml"], 2, "cannot read site config"
    ),
    "config-url-unreachable": Case(
        {},
        ["config", "show", "--config", "http://127.0.0.1:9/c.yaml"],
        2,
        "cannot fetch site config",
    ),
    "config-url-bomb": Case(
        {"served/bomb.yaml": bomb()},
        ["config", "show", "--config", "{url}/bomb.yaml"],
        2,
        "alias bomb",
    ),
    "config-url-huge": Case(
        {"served/huge.yaml": "# x\n" * 400_000},
        ["config", "show", "--config", "{url}/huge.yaml"],
        2,
        "larger than",
    ),
    "config-url-binary": Case(
        {"served/bin.yaml": b"\x00" * 50},
        ["config", "show", "--config", "{url}/bin.yaml"],
        2,
        "binary",
    ),
    # --- lockfiles ------------------------------------------------------------------------------
    "lock-binary": lock_case(b"\x89PNG\r\n\x1a\n\x00\x00", "binary file"),
    "lock-latin1": lock_case(GOOD_LOCK.encode() + "# \xe9\n".encode("latin-1"), "not UTF-8"),
    "lock-alias-bomb": lock_case(bomb(), "alias bomb"),
    "lock-duplicate-key": lock_case(GOOD_LOCK + "backend: conda\n", "duplicate key 'backend'"),
    "lock-no-version": lock_case(lock_with("schema_version: 1\n", ""), "schema_version None"),
    "lock-stage-id-traversal": lock_case(
        lock_with("id: install-verl", "id: ../../../tmp/x"), "not a valid stage id"
    ),
    "lock-package-traversal": lock_case(
        lock_with("name: filelock", "name: ../../filelock"), "not a valid package name"
    ),
    "lock-hash-not-hex": lock_case(
        lock_with(first_hash(), "../x"),
        "sha256",
    ),
    "lock-sdist-traversal": lock_case(
        lock_with("sdist: verl-0.9.1.tar.gz", "sdist: ../../../x.tar.gz"), "not a valid file name"
    ),
    "lock-regenerate-newline": lock_case(
        lock_with("\nregenerate: ", '\nregenerate: "x\\nrm -rf ~"\nold_regenerate: '),
        "one line",
    ),
    "lock-python-garbage": lock_case(lock_with("python: '3.11'", "python: '3'"), "Python version"),
    "lock-profile-traversal": lock_case(
        lock_with("profile: cpu", "profile: ../../cpu"), "not a valid profile name"
    ),
    "lock-platform-slash": lock_case(
        lock_with("platform: linux-64", "platform: ../x"), "not a valid file name"
    ),
    "lock-unknown-key": lock_case(GOOD_LOCK + "colour: blue\n", "colour"),
    "lock-a-list": lock_case("- 1\n", "not a lockfile"),
    "lock-folder": Case(
        {"ldir/x": "x"},
        ["export", "--format", "requirements", "--lockfile", "{t}/ldir"],
        2,
        "is a folder",
    ),
    "lock-a-fifo": Case(
        {"l.yaml": FIFO},
        ["export", "--format", "requirements", "--lockfile", "{t}/l.yaml", "--output", "{t}/o"],
        2,
        "not a regular file",
    ),
    "lock-dev-zero": Case(
        {},
        ["export", "--format", "requirements", "--lockfile", "/dev/zero", "--output", "{t}/o"],
        2,
        "not a regular file",
    ),
    # --- flags ----------------------------------------------------------------------------------
    "flag-prefix-is-a-file": Case(
        {"afile": "mine"}, [*PLAN, "--prefix", "{t}/afile"], 2, "is a file, not a folder"
    ),
    "flag-prefix-newline": Case({}, [*PLAN, "--prefix", "{t}/a\nb"], 2, "line break"),
    "flag-index-malformed": Case({}, [*PLAN, "--index", "nourl"], 2, "expected NAME=URL"),
    "flag-index-missing-folder": Case(
        {}, [*PLAN, "--index", "x={t}/none"], 2, "neither a URL nor an existing folder"
    ),
    "flag-unknown": Case({}, [*PLAN, "--colour"], 2, "unrecognized arguments"),
    "flag-bad-backend": Case({}, [*PLAN, "--backend", "docker"], 2, "invalid choice"),
    "flag-verify-prefix-file": Case(
        {"afile": "mine"}, ["verify", "--prefix", "{t}/afile"], 2, "is not a folder"
    ),
    "flag-sbatch-partition-newline": Case(
        {},
        [
            "cluster",
            "script",
            "--slurm",
            "--nodes",
            "2",
            "--prefix",
            "{t}/env",
            "--partition",
            "gpu\nrm -rf ~",
            "--output",
            "{t}/job.sh",
        ],
        2,
        "#SBATCH",
    ),
    "flag-sbatch-time-injection": Case(
        {},
        [
            "cluster",
            "script",
            "--slurm",
            "--nodes",
            "2",
            "--prefix",
            "{t}/env",
            "--time",
            "1:00:00 $(id)",
            "--output",
            "{t}/job.sh",
        ],
        2,
        "#SBATCH",
    ),
    "flag-export-bad-format": Case({}, ["export", "--format", "zip"], 2, "invalid choice"),
    # --- environment variables -----------------------------------------------------------------
    "env-config-binary": Case(
        {"c.yaml": b"\x00" * 10},
        ["config", "show"],
        2,
        "binary file",
        env={"VERL_BOOTSTRAP_CONFIG": "{t}/c.yaml"},
    ),
    "env-config-a-fifo": Case(
        {"c.yaml": FIFO},
        ["config", "show"],
        2,
        "not a regular file",
        env={"VERL_BOOTSTRAP_CONFIG": "{t}/c.yaml"},
    ),
    "env-config-missing": Case(
        {},
        ["config", "show"],
        2,
        "cannot read site config",
        env={"VERL_BOOTSTRAP_CONFIG": "{t}/none.yaml"},
    ),
    "env-config-bomb": Case(
        {"c.yaml": bomb()},
        ["config", "show"],
        2,
        "alias bomb",
        env={"VERL_BOOTSTRAP_CONFIG": "{t}/c.yaml"},
    ),
    "env-pip-config-broken": Case(
        {"pip.conf": "[global\nindex-url = x\n"},
        PLAN,
        2,
        "cannot parse pip config",
        env={"PIP_CONFIG_FILE": "{t}/pip.conf"},
    ),
    "env-condarc-bomb": Case(
        {"condarc": bomb()},
        [*PLAN[:3], "--backend", "conda"],
        2,
        "alias bomb",
        env={"CONDARC": "{t}/condarc"},
    ),
    # --- shared files and the flags that name them ----------------------------------------------
    "lock-glibc-not-a-version": Case(
        {"l.yaml": lock_with("__glibc: '2.28'", "__glibc: abc")},
        ["plan", "--profile", "cpu", "--lockfile", "{t}/l.yaml", "--locked"],
        2,
        "cuda.virtual_packages.__glibc 'abc' is not a glibc version",
    ),
    "config-wheelhouse-index-not-utf8": Case(
        {"wh/index.json": b'{"wheels": []}\xff\xfe'},
        ["wheelhouse", "list", "--wheelhouse", "{t}/wh"],
        2,
        "not a wheelhouse index (not UTF-8 text, byte 14)",
    ),
    "config-wheelhouse-bad-url": Case(
        {"c.yaml": 'schema_version: 1\nwheelhouse: "http://u:p@[bad/"\n'},
        ["wheelhouse", "list", "--config", "{t}/c.yaml"],
        2,
        "wheelhouse 'http://***@[bad/' is not a valid URL",
    ),
    "flag-key-of-no-env": Case(
        {"w-1.0-py3-none-any.whl": b"not really a wheel"},
        [
            "wheelhouse",
            "add",
            "{t}/w-1.0-py3-none-any.whl",
            "--key-of",
            "{t}/no-env",
            "--wheelhouse",
            "{t}/wh",
        ],
        2,
        "--key-of {t}/no-env: no env there",
    ),
    "flag-wait-nan": Case(
        {},
        ["--profile", "cpu", "--dry-run", "--wait", "nan"],
        2,
        "'nan' is not a finite number of seconds",
    ),
    "flag-wait-negative": Case(
        {},
        ["--profile", "cpu", "--dry-run", "--wait", "-5"],
        2,
        "'-5' is not a finite number of seconds",
    ),
    "flag-bundle-output-unwritable": Case(
        {},
        [
            "bundle",
            "--lockfile",
            str(REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml"),
            "--output",
            "/proc/version",
        ],
        2,
        "--output /proc/version: cannot write there",
    ),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A loopback HTTP server for configs fetched by URL."""
    root = tmp_path_factory.mktemp("served")
    server = serve(root)
    yield root, base_url(server)
    server.shutdown()


def snapshot(root: Path, skip: Path) -> dict[str, str]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_relative_to(skip):
            continue
        if path.is_fifo():
            found[str(path.relative_to(root))] = "fifo"
            continue
        kind = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        found[str(path.relative_to(root))] = kind
    return found


def fill(text: str, t: Path, url: str) -> str:
    return text.replace("{t}", str(t)).replace("{url}", url)


def run_case(
    case: Case,
    t: Path,
    served: tuple[Path, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, float]:
    root, url = served
    for name, body in case.files.items():
        where = root / name.removeprefix("served/") if name.startswith("served/") else t / name
        where.parent.mkdir(parents=True, exist_ok=True)
        if body is FIFO:
            if not where.exists():
                os.mkfifo(where)  # reading it would wait for a writer forever
            continue
        where.write_bytes(body if isinstance(body, bytes) else body.encode())
    home = t / "home"
    home.mkdir(exist_ok=True)
    for var in ("VERL_BOOTSTRAP_CONFIG", "PIP_CONFIG_FILE", "CONDARC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(home / ".verl-bootstrap"))
    for key, value in case.env.items():
        monkeypatch.setenv(key, fill(value, t, url))
    start = time.perf_counter()
    code, out, err = run([fill(a, t, url) for a in case.argv], capsys)
    seconds = time.perf_counter() - start
    return code, out + err, seconds


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_refused_cleanly(
    name: str,
    tmp_path: Path,
    served: tuple[Path, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CASES[name]
    tool_home = tmp_path / "home" / ".verl-bootstrap"
    seed = run_case(Case(case.files, ["--version"], 0, ""), tmp_path, served, monkeypatch, capsys)
    assert seed[0] == 0  # the case's files are written, and the CLI runs at all
    files = snapshot(tmp_path, tool_home)
    code, output, seconds = run_case(case, tmp_path, served, monkeypatch, capsys)
    assert "Traceback" not in output, output
    assert code == case.code, output
    assert fill(case.message, tmp_path, served[1]) in output, output
    assert (
        snapshot(tmp_path, tool_home) == files
    )  # nothing of the user's was written, changed or removed
    assert not list(tool_home.glob("logs/crash-*")), "an input error is not a crash"
    assert seconds < 30, f"{name} took {seconds:.1f}s"


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 60
    kinds = {name.split("-", 1)[0] for name in CASES}
    assert kinds == {"profile", "config", "lock", "flag", "env"}


def test_yaml_that_is_fine_still_loads(tmp_path: Path) -> None:
    """The bounds refuse abuse, not YAML features: anchors, merge keys, and every shipped file."""
    path = tmp_path / "p.yaml"
    path.write_text("schema_version: 1\nbase: &b {x: 1}\nc:\n  <<: *b\n  y: 2\nd: [*b, *b]\n")
    from verl_bootstrap.safety.yamlfile import load_yaml  # noqa: PLC0415

    located = load_yaml(path, what="profile")
    assert located.data["c"] == {"x": 1, "y": 2} and located.data["d"] == [{"x": 1}] * 2
    assert located.lines[("c", "y")] == (path, 5)
    for shipped in sorted((REPO / "lockfiles").glob("*/*.yaml")):
        assert yaml.safe_load(shipped.read_text()) == load_yaml(shipped, what="lockfile").data


def test_an_alias_bomb_is_refused_in_milliseconds(tmp_path: Path) -> None:
    """Not a performance assertion (bench/ measures it): a generous bound that only fails when
    the 9**12 values are actually expanded, which takes minutes and gigabytes."""
    from verl_bootstrap.errors import InputError  # noqa: PLC0415
    from verl_bootstrap.safety.yamlfile import load_yaml  # noqa: PLC0415

    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(levels=12))
    start = time.perf_counter()
    with pytest.raises(InputError, match="alias bomb"):
        load_yaml(path, what="profile")
    assert time.perf_counter() - start < 5
