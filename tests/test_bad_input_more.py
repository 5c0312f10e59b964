"""More of the bad-input corpus (issue 32's review): each case through the real CLI, in-process,
by test_bad_input's runner, with the same demands: its exit code (2 bad input, 3 a refusal), a
message naming the problem, no traceback, no crash log, and nothing of the user's changed.

The families: values Python itself refuses (a 5,001-digit number, an unclosed IPv6 host), JSON
nested 100,000 deep in every JSON file the tool reads, a lockfile's shapes, a site config's
shapes, flags checked before anything runs (under --dry-run too), outputs in folders that are
not there, a shared wheelhouse's keys, and credentials in a published onboarding config.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_bad_input import CASES, FIFO, GOOD_LOCK, PLAN, PROFILE, Case, lock_with, served  # noqa: F401 - served: the runner's fixture
from test_bad_input import test_bad_input_is_refused_cleanly as _run_one

REPO = Path(__file__).resolve().parents[1]
LOCK = str(REPO / "lockfiles" / "cpu" / "cpu-linux-64.lock.yaml")
DEEP = "[" * 100_000 + "]" * 100_000
BIG = "9" * 5001


def config(body: str) -> str:
    return "schema_version: 1\n" + body + "\n"


def show(body: str, message: str) -> Case:
    """A site config, shown (`config show` validates every file)."""
    return Case({"c.yaml": config(body)}, ["config", "show", "--config", "{t}/c.yaml"], 2, message)


def planned(body: str, message: str, code: int = 2) -> Case:
    """A site config a plan runs with."""
    argv = [*PLAN, "--prefix", "{t}/env", "--config", "{t}/c.yaml"]
    return Case({"c.yaml": config(body)}, argv, code, message)


def locked(body: str, message: str) -> Case:
    """A lockfile exported (read, checked field by field)."""
    argv = ["export", "--format", "requirements", "--lockfile", "{t}/l.yaml"]
    return Case({"l.yaml": body}, [*argv, "--output", "{t}/out"], 2, message)


def lock_plan(body: str, message: str) -> Case:
    """A lockfile a `--locked` plan installs (checked against its profile too)."""
    argv = ["plan", "--profile", "cpu", "--lockfile", "{t}/l.yaml", "--frozen"]
    return Case({"l.yaml": body}, [*argv, "--prefix", "{t}/env"], 2, message)


def lock_flag(flags: list[str], message: str) -> Case:
    return Case({}, ["lock", "--profile", "cpu", "--output", "{t}/l.yaml", *flags], 2, message)


def emitted(body: str, what: str) -> Case:
    argv = ["onboard", "--config", "{t}/c.yaml", "--emit-script", "{t}/onboard.sh"]
    return Case(
        {"c.yaml": config(body)}, argv, 2, f"{what} holds a credential, and a published script"
    )


def key_add(key: str, message: str, *more: str) -> Case:
    argv = ["wheelhouse", "add", "{t}/w-1.0-py3-none-any.whl", "--key", key]
    return Case(
        {"w-1.0-py3-none-any.whl": _wheel()}, [*argv, "--wheelhouse", "{t}/wh", *more], 2, message
    )


def _wheel() -> bytes:
    import zipfile  # noqa: PLC0415 - only here

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("w/__init__.py", "")
    return buffer.getvalue()


def _bundle(manifest: str) -> bytes:
    """A bundle whose first member is `manifest` as manifest.json."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = manifest.encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def good_key(**changed: str) -> str:
    fields = {"torch": "2.8.0", "cuda": "12.8", "cxx11abi": "TRUE", "python": "cp312"}
    fields["platform"] = "linux_x86_64"
    fields.update(changed)
    return ",".join(f"{k}={v}" for k, v in fields.items())


def no_first_hashes(text: str, where: str) -> str:
    """`text` with the hashes of the first `where` entry (`build` or a distribution) as []."""
    start = (
        text.index("distributions:\n  - hashes:") if where == "dist" else text.index("- hashes:")
    )
    found = re.compile(r"hashes:\n(\s+- [0-9a-f]{64}\n)+").search(text, start)
    assert found
    return text[: found.start()] + "hashes: []\n" + text[found.end() :]


SERVED_VAR = "served/vars.yaml"

IPV6_INDEX = "env: {backend: venv}\nindexes: {lab: {url: 'http://[::1'}}"
LINE_BREAK_INDEX = (
    'env: {backend: venv}\nindexes: {lab: {url: "https://a.invalid/s\\n--extra-index-url=x"}}'
)
FSDP_LOCK = REPO / "lockfiles" / "fsdp" / "cu128-linux-64.lock.yaml"


def _fsdp_flash(change: Callable[[dict[str, Any]], None]) -> str:
    """The committed fsdp cu128 lock with its flash-attn stage changed by `change`."""
    body: dict[str, Any] = yaml.safe_load(FSDP_LOCK.read_text())
    change(next(s for s in body["stages"] if s["id"] == "flash-attn"))
    return yaml.safe_dump(body)


def lock_plan_gpu(url: str, message: str) -> Case:
    """The fsdp lock whose flash-attn records a release kernel wheel at `url`, planned."""
    wheel = {
        "file": "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl",
        "sha256": "a" * 64,
        "source": "release",
        "key": {"torch": "2.10.0", "cuda": "12.8", "cxx11abi": True, "python": "cp312"},
        "url": url,
    }
    wheel["key"]["platform"] = "linux_x86_64"  # type: ignore[index]
    body = _fsdp_flash(lambda stage: stage["distributions"][0].update(kernel_wheel=wheel))
    argv = ["plan", "--profile", "fsdp", "--cuda", "cu128", "--lockfile", "{t}/l.yaml"]
    return Case({"l.yaml": body}, [*argv, "--frozen", "--prefix", "{t}/env"], 2, message)


def lock_env_gpu(env: dict[str, str], message: str) -> Case:
    """The fsdp lock whose flash-attn stage sets `env`, planned --frozen."""
    body = _fsdp_flash(lambda stage: stage.update(env=env))
    argv = ["plan", "--profile", "fsdp", "--cuda", "cu128", "--lockfile", "{t}/l.yaml"]
    return Case({"l.yaml": body}, [*argv, "--frozen", "--prefix", "{t}/env"], 2, message)


MORE: dict[str, Case] = {
    # --- values Python refuses: a 5,001-digit number, an unclosed IPv6 host ---
    "number-schema-version-profile": Case(
        {"p.yaml": f"schema_version: {BIG}\n"},
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "a value that cannot be read",
    ),
    "number-schema-version-config": show(f"x: {BIG}", "a value that cannot be read"),
    "number-schema-version-lock": locked(
        lock_with("schema_version: 1", f"schema_version: {BIG}"), "a value that cannot be read"
    ),
    "number-in-a-list-of-a-config": show(f"caches: {{uv: [{BIG}]}}", "a value that cannot be read"),
    "number-env-config": Case(
        {"c.yaml": f"schema_version: {BIG}\n"},
        ["config", "show"],
        2,
        "a value that cannot be read",
        env={"VERL_BOOTSTRAP_CONFIG": "{t}/c.yaml"},
    ),
    "ipv6-wheelhouse": show(
        'wheelhouse: "http://[::1"', "wheelhouse 'http://[::1' is not a valid URL"
    ),
    "ipv6-lockfiles": planned(
        'lockfiles: "http://[::1"', "lockfiles 'http://[::1' is not a valid URL"
    ),
    "ipv6-index-url": show(
        'mirrors: {pypi: {index_url: "http://[::1/simple"}}',
        "index_url 'http://[::1/simple' is not",
    ),
    "ipv6-git-mirror": show(
        'mirrors: {git: {"https://github.com/": "http://[fe80::1/"}}', "is not a valid URL"
    ),
    "ipv6-default-lockfile": show(
        'defaults: {lockfile: "https://[::1/l.yaml"}', "is not a valid URL"
    ),
    "ipv6-proxy": show('network: {proxy: {https: "http://[::1:3128"}}', "is not a valid URL"),
    "ipv6-config-flag-show": Case(
        {}, ["config", "show", "--config", "http://[::1"], 2, "is not a valid URL"
    ),
    "ipv6-config-flag-plan": Case(
        {}, [*PLAN, "--config", "http://[::1/c.yaml"], 2, "is not a valid URL"
    ),
    "ipv6-config-env": Case(
        {},
        ["config", "show"],
        2,
        "is not a valid URL",
        env={"VERL_BOOTSTRAP_CONFIG": "https://[::1"},
    ),
    # --- JSON nested 100,000 deep, in each JSON file the tool reads ---
    "deep-json-bundle-manifest": Case(
        {"b.tar": _bundle(DEEP)},
        ["--profile", "cpu", "--bundle", "{t}/b.tar", "--prefix", "{t}/env", "--dry-run"],
        2,
        "manifest.json is not JSON",
    ),
    "deep-json-state": Case(
        {"env/.verl-bootstrap/state.json": DEEP, "env/bin/python": "#!/bin/sh\n"},
        [*PLAN, "--prefix", "{t}/env"],
        2,
        "nested deeper than 64 levels",
    ),
    "deep-json-state-in-object": Case(
        {"env/.verl-bootstrap/state.json": '{"version": ' + DEEP + "}"},
        [*PLAN, "--prefix", "{t}/env"],
        2,
        "unreadable state",
    ),
    "deep-json-envs-list": Case(
        {"home/.verl-bootstrap/envs.json": DEEP}, ["envs", "list"], 2, "unreadable list of envs"
    ),
    "deep-json-wheelhouse-index": Case(
        {"wh/index.json": '{"wheels": ' + DEEP + "}"},
        ["wheelhouse", "list", "--wheelhouse", "{t}/wh"],
        2,
        "not a wheelhouse index",
    ),
    "deep-json-wheelhouse-index-check": Case(
        {"wh/index.json": DEEP},
        ["wheelhouse", "check", "--wheelhouse", "{t}/wh"],
        2,
        "not a wheelhouse index",
    ),
    # --- a lockfile's shapes ---
    "lock-hashes-empty": locked(no_first_hashes(GOOD_LOCK, "dist"), "lists no sha256 in hashes"),
    "lock-build-hashes-empty": locked(no_first_hashes(GOOD_LOCK, "build"), "lists no sha256"),
    "lock-hashes-empty-to-plan": lock_plan(no_first_hashes(GOOD_LOCK, "dist"), "lists no sha256"),
    "lock-version-not-pep440": locked(lock_with("version: 4.3.2", "version: four"), "four"),
    "lock-variant-bad": locked(lock_with("variant: cpu", "variant: cuda-latest"), "cuda.variant"),
    "lock-index-name-slash": locked(lock_with("index: default", "index: ../x"), "index"),
    "lock-option-with-space": locked(
        lock_with("- --no-deps\n", "- --no-deps; rm -rf ~\n"), "options"
    ),
    "lock-env-name-bad": locked(lock_with("env: {}", "env: {'LD PRELOAD': x}"), "env"),
    "lock-env-value-newline": locked(lock_with("env: {}", 'env: {MAX_JOBS: "4\\nrm"}'), "env"),
    "lock-cutoff-garbage": locked(
        lock_with("exclude_newer: '2026-12-01T00:00:00Z'", "exclude_newer: soon"), "exclude_newer"
    ),
    "lock-profile-hash-bad": locked(
        lock_with("profile_hash: sha256:", "profile_hash: md5:"), "profile_hash"
    ),
    "lock-backend-unknown": locked(lock_with("backend: venv", "backend: docker"), "backend"),
    "lock-stage-kind-bad": locked(lock_with("kind: packages", "kind: Packages!"), "kind"),
    "lock-sdist-sha-short": locked(
        lock_with("sdist_sha256: 3e03", "sdist_sha256: 3e0"), "sdist_sha256"
    ),
    "lock-verl-ref-shell": locked(lock_with("ref: v0.9.1", "ref: 'v0.9.1;id'"), "verl.ref"),
    "lock-glibc-newline": locked(lock_with("__glibc: '2.28'", '__glibc: "2.28\\nx"'), "__glibc"),
    "lock-python-newline": locked(
        lock_with("python: '3.11'", 'python: "3.11\\n"'), "Python version"
    ),
    "lock-platform-unknown": locked(
        lock_with("platform: linux-64", "platform: win/64"), "platform"
    ),
    "lock-stages-a-mapping": locked(lock_with("stages:\n", "stages: {}\nold_stages:\n"), "stages"),
    "lock-distribution-a-string": locked(
        lock_with("distributions:\n  - hashes:", "distributions:\n  - filelock\n  - hashes:"),
        "distributions",
    ),
    "lock-editable-ordinary": lock_plan(
        lock_with("name: filelock\n    source: wheel", "name: filelock\n    source: editable"),
        "source: editable on torch: filelock",
    ),
    "lock-editable-ordinary-no-hashes": lock_plan(
        lock_with(
            "    index: default\n    name: fsspec\n    source: wheel",
            "    index: default\n    name: fsspec\n    source: editable",
        ),
        "which the profile installs from an index",
    ),
    # --- a site config's shapes ---
    "site-proxy-ftp": show("network: {proxy: {https: 'ftp://proxy:21'}}", "not a URL"),
    "site-kernel-source-bad-id": show("kernel_sources: ['../x']", "a source id is letters"),
    "site-kernel-source-twice": show("kernel_sources: [wheelhouse, wheelhouse]", "named twice"),
    "site-cuda-arch-bad": show("defaults: {cuda_arch: ['sm_90']}", "not a CUDA architecture"),
    "site-pytorch-variant-bad": show(
        "mirrors: {pytorch: {cuda12: 'https://m/t'}}", "not a CUDA variant"
    ),
    "site-indexes-default": show("mirrors: {indexes: {default: 'https://m/s'}}", "indexes.default"),
    "site-index-ftp": show("mirrors: {pypi: {index_url: 'ftp://m/simple'}}", "not a URL"),
    "site-conda-channel-ftp": show(
        "mirrors: {conda: {custom_channels: {nvidia: 'ftp://m/nv'}}}", "not a URL"
    ),
    "site-wheelhouse-ftp": show("wheelhouse: 'ftp://lab/wh'", "must be a folder or an http(s) URL"),
    "site-unknown-nested-key": show("mirrors: {pypi: {colour: blue}}", "colour"),
    "site-caches-a-list": show("caches: {uv: [a, b]}", "caches.uv"),
    "site-lockfiles-a-list": show("lockfiles: [a, b]", "lockfiles"),
    "site-no-proxy-a-number": show("network: {proxy: {no_proxy: 5}}", "no_proxy"),
    "site-lockfiles-a-file": planned(
        "lockfiles: /etc/passwd", "lockfiles: /etc/passwd is not a folder"
    ),
    "site-lockfiles-a-fifo": Case(
        {"c.yaml": config("lockfiles: pipe"), "pipe": FIFO},
        [*PLAN, "--prefix", "{t}/env", "--config", "{t}/c.yaml"],
        2,
        "is not a folder",
    ),
    "site-url-names-a-variable": Case(
        {SERVED_VAR: config("mirrors: {pypi: {index_url: 'https://x.invalid/?k=${HOME}'}}")},
        ["config", "show", "--config", "{url}/vars.yaml"],
        2,
        "names ${HOME}: a site config fetched from a URL reads only the variables you name in "
        "$VERL_BOOTSTRAP_CONFIG_VARS",
    ),
    "site-url-names-a-bare-variable": Case(
        {"served/bare.yaml": config("caches: {uv: /scratch/$USER/uv}")},
        ["config", "show", "--config", "{url}/bare.yaml"],
        2,
        "names ${USER}",
    ),
    "site-url-names-an-unset-variable": Case(
        {"served/unset.yaml": config("wheelhouse: 'https://lab.invalid/${VB_NO_SUCH}/wh'")},
        ["config", "show", "--config", "{url}/unset.yaml"],
        2,
        "reads only the variables you name",
    ),
    "site-url-relative-cache": Case(
        {"served/rel.yaml": config("caches: {uv: scratch/uv}")},
        ["config", "show", "--config", "{url}/rel.yaml"],
        2,
        "must be an absolute path in a config from a URL",
    ),
    # --- lock's flags, refused before anything runs (under --dry-run too) ---
    "flag-lock-python-version-3": lock_flag(
        ["--python-version", "3"], "'3' is not a Python version"
    ),
    "flag-lock-python-version-3-dry": lock_flag(
        ["--python-version", "3", "--dry-run"], "is not a Python version"
    ),
    "flag-lock-python-version-word": lock_flag(
        ["--python-version", "three"], "not a Python version"
    ),
    "flag-lock-python-version-2": lock_flag(["--python-version", "2.7"], "not a Python version"),
    "flag-lock-python-version-x": lock_flag(["--python-version", "3.x"], "not a Python version"),
    "flag-lock-glibc-abc": lock_flag(["--glibc", "abc"], "'abc' is not a glibc version"),
    "flag-lock-glibc-abc-dry": lock_flag(["--glibc", "abc", "--dry-run"], "not a glibc version"),
    "flag-lock-glibc-major": lock_flag(["--glibc", "2"], "not a glibc version"),
    "flag-lock-glibc-three": lock_flag(["--glibc", "3.1"], "not a glibc version"),
    "flag-lock-exclude-newer-garbage": lock_flag(
        ["--exclude-newer", "garbage"], "'garbage' is not a date or time"
    ),
    "flag-lock-exclude-newer-garbage-dry": lock_flag(
        ["--exclude-newer", "garbage", "--dry-run"], "is not a date or time"
    ),
    "flag-lock-exclude-newer-month-13": lock_flag(["--exclude-newer", "2026-13-01"], "not a date"),
    "flag-lock-exclude-newer-yesterday": lock_flag(["--exclude-newer", "yesterday"], "not a date"),
    # --- --skip-check of no check ---
    "flag-skip-check-unknown-plan": Case(
        {}, [*PLAN, "--skip-check", "nonexistent"], 2, "--skip-check 'nonexistent': no check"
    ),
    "flag-skip-check-typo-plan": Case(
        {}, [*PLAN, "--skip-check", "dsk"], 2, "did you mean 'disk'?"
    ),
    "flag-skip-check-unknown-doctor": Case(
        {}, ["doctor", "--skip-check", "nonexistent"], 2, "no check has that name"
    ),
    "flag-skip-check-typo-install": Case(
        {}, ["--profile", "cpu", "--dry-run", "--skip-check", "glib"], 2, "did you mean 'glibc'?"
    ),
    "flag-skip-check-empty": Case({}, [*PLAN, "--skip-check", ""], 2, "no check has that name"),
    # --- outputs in a folder that is not there (never made) ---
    **{
        f"flag-export-{fmt}-missing-folder": Case(
            {},
            ["export", "--format", fmt, "--lockfile", LOCK, "--output", f"{{t}}/none/{name}"],
            2,
            "{t}/none does not exist",
        )
        for fmt, name in (
            ("requirements", "req"),
            ("pylock", "pylock.toml"),
            ("conda-lock", "conda-lock.yml"),
            ("apptainer", "verl.def"),
            ("dockerfile", "Dockerfile"),
        )
    },
    "flag-export-missing-folder-dry": Case(
        {},
        [
            "export",
            "--format",
            "pylock",
            "--lockfile",
            LOCK,
            "-o",
            "{t}/a/b/pylock.toml",
            "--dry-run",
        ],
        2,
        "{t}/a/b does not exist",
    ),
    "flag-export-under-a-file": Case(
        {"afile": "mine"},
        ["export", "--format", "pylock", "--lockfile", LOCK, "-o", "{t}/afile/pylock.toml"],
        2,
        "{t}/afile is not a folder",
    ),
    "flag-bundle-missing-folder": Case(
        {},
        ["bundle", "--lockfile", LOCK, "--output", "{t}/none/b.tar"],
        2,
        "{t}/none does not exist",
    ),
    "flag-bundle-missing-folder-dry": Case(
        {},
        ["bundle", "--lockfile", LOCK, "--output", "{t}/none/b.tar", "--dry-run"],
        2,
        "{t}/none does not exist",
    ),
    # --- a shared wheelhouse's keys ---
    "key-torch-shell": key_add(
        "torch=;rm,cuda=12.8,cxx11abi=TRUE,python=cp312,platform=x", "--key.torch: ';rm'"
    ),
    "key-torch-shell-dry": key_add(good_key(torch=";rm"), "is not a torch version", "--dry-run"),
    "key-cuda-word": key_add(good_key(cuda="twelve"), "--key.cuda: 'twelve' is not a CUDA version"),
    "key-python-py3": key_add(good_key(python="py3"), "--key.python: 'py3' is not a Python tag"),
    "key-platform-traversal": key_add(good_key(platform="../x"), "is not a platform tag"),
    "key-abi-maybe": key_add(good_key(cxx11abi="maybe"), "--key.cxx11abi: 'maybe' is not true"),
    "key-abi-maybe-dry": key_add(good_key(cxx11abi="maybe"), "is not true or false", "--dry-run"),
    "key-torch-space": key_add(good_key(torch="2.8 0"), "is not a torch version"),
    # --- a published onboarding config holds no literal credential ---
    "emit-lockfiles-userinfo": emitted("lockfiles: https://me:pw@lab.invalid/locks", "lockfiles"),
    "emit-wheelhouse-token": emitted(
        "wheelhouse: 'https://lab.invalid/wh?private_token=abc123'", "wheelhouse"
    ),
    "emit-index-token": emitted(
        "mirrors: {indexes: {torch: 'https://lab.invalid/t?token=abc'}}", "mirrors.indexes.torch"
    ),
    "emit-git-mirror-glpat": emitted(
        "mirrors: {git: {'https://github.com/': 'https://glpat-abcdefabcdefabcdefab@git.lab.invalid/'}}",
        "mirrors.git.https://github.com/",
    ),
    "emit-pytorch-mirror-userinfo": emitted(
        "mirrors: {pytorch: {cpu: 'https://u:p@lab.invalid/cpu'}}", "mirrors.pytorch.cpu"
    ),
    "emit-conda-alias-userinfo": emitted(
        "mirrors: {conda: {channel_alias: 'https://u:p@lab.invalid/conda'}}",
        "mirrors.conda.channel_alias",
    ),
    "emit-default-lockfile-signed": emitted(
        "defaults: {lockfile: 'https://lab.invalid/l.yaml?X-Amz-Signature=abcdef'}",
        "defaults.lockfile",
    ),
    "emit-extra-index-userinfo": emitted(
        "mirrors: {pypi: {extra_index_urls: ['https://u:p@lab.invalid/x']}}",
        "mirrors.pypi.extra_index_urls",
    ),
    # --- profiles ---
    "profile-python-requires-garbage": Case(
        {
            "p.yaml": PROFILE.replace(
                "env: {backend: venv}", "env: {backend: venv}\npython: {requires: '>>3'}"
            )
        },
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "requires",
    ),
    "profile-stage-packages-a-string": Case(
        {"p.yaml": PROFILE.replace("packages: [cachetools]", "packages: cachetools")},
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "packages",
    ),
    "profile-stage-id-upper": Case(
        {
            "p.yaml": PROFILE.replace(
                "packages: [cachetools]",
                "packages: [cachetools]\n  - id: Deps-2\n    packages: [x]",
            )
        },
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "not a stage id",
    ),
    "profile-variant-bad": Case(
        {"p.yaml": PROFILE.replace("cpu: {description", "cuda-12: {description")},
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "cuda-12",
    ),
    "profile-number-as-name": Case(
        {"p.yaml": PROFILE.replace("name: tiny", f"name: {BIG}")},
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "a value that cannot be read",
    ),
    "profile-stage-twice": Case(
        {
            "p.yaml": PROFILE.replace(
                "  - id: deps\n    packages: [cachetools]\n",
                "  - id: deps\n    packages: [a]\n  - id: deps\n    packages: [b]\n",
            )
        },
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "deps",
    ),
    # --- issue 41: untrusted input reaching uv's arguments, the terminal, or a crash ---
    "profile-index-unclosed-ipv6": Case(
        {"p.yaml": PROFILE.replace("env: {backend: venv}", IPV6_INDEX)},
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "indexes.lab.url: 'http://[::1' is not a URL",
    ),
    "profile-index-unclosed-ipv6-planned": Case(
        {"p.yaml": PROFILE.replace("env: {backend: venv}", IPV6_INDEX)},
        ["plan", "--profile", "{t}/p.yaml", "--prefix", "{t}/env"],
        2,
        "'http://[::1' is not a URL",
    ),
    "profile-index-line-break": Case(
        {"p.yaml": PROFILE.replace("env: {backend: venv}", LINE_BREAK_INDEX)},
        ["profiles", "validate", "{t}/p.yaml"],
        2,
        "an index URL must be one line",
    ),
    "index-flag-line-break": Case(
        {},
        [*PLAN, "--prefix", "{t}/env", "--index", "default=https://a.invalid/s\n--pre"],
        2,
        "holds a line break or control character",
    ),
    "index-flag-unclosed-ipv6": Case(
        {}, [*PLAN, "--prefix", "{t}/env", "--index", "lab=http://[::1"], 2, "is not a URL"
    ),
    "site-index-url-line-break": planned(
        'mirrors: {pypi: {index_url: "https://a.invalid/s\\n--extra-index-url=https://x.invalid"}}',
        "mirrors.pypi.index_url holds a line break or control character",
    ),
    "site-extra-index-tab": planned(
        'mirrors: {pypi: {extra_index_urls: ["https://a.invalid/s\\t--pre"]}}',
        "mirrors.pypi.extra_index_urls[0] holds a line break",
    ),
    "site-index-url-line-break-from-a-variable": Case(
        {"c.yaml": config("mirrors: {pypi: {index_url: '${VB_LAB_INDEX}'}}")},
        [*PLAN, "--prefix", "{t}/env", "--config", "{t}/c.yaml"],
        2,
        "mirrors.pypi.index_url holds a line break",
        env={"VB_LAB_INDEX": "https://a.invalid/s\n--extra-index-url=https://x.invalid"},
    ),
    "prefix-empty": Case({}, [*PLAN, "--prefix", ""], 2, "argument --prefix: an empty path"),
    "prefix-a-name-too-long": Case(
        {}, [*PLAN, "--prefix", "{t}/" + "a" * 5000], 2, "a name in it may be at most 255 bytes"
    ),
    "prefix-too-long": Case(
        {}, [*PLAN, "--prefix", "{t}/" + "ab/" * 800], 2, "the whole path 2048"
    ),
    "train-dir-a-file": Case(
        {"env/bin/python": "", "notes.txt": "mine"},
        ["verify", "--prefix", "{t}/env", "--train", "rl", "--train-dir", "{t}/notes.txt"],
        2,
        "--train-dir {t}/notes.txt: it is not a folder",
    ),
    "train-dir-etc-passwd": Case(
        {"env/bin/python": ""},
        ["verify", "--prefix", "{t}/env", "--train", "sft", "--train-dir", "/etc/passwd"],
        2,
        "--train-dir /etc/passwd: it is not a folder",
    ),
    "train-dir-under-a-file": Case(
        {"env/bin/python": "", "notes.txt": "mine"},
        ["verify", "--prefix", "{t}/env", "--train", "rl", "--train-dir", "{t}/notes.txt/x"],
        2,
        "{t}/notes.txt is not a folder",
    ),
    "slurm-submit-without-srun": Case(
        {},
        ["cluster", "verify", "--slurm", "--submit", "--nodes", "2", "--prefix", "/p"],
        2,
        "srun is not on PATH",
        env={"PATH": "{t}/no-slurm-here"},
    ),
    "lock-kernel-url-climbs-out": lock_plan_gpu(
        "https://github.com/Dao-AILab/flash-attention/releases/download/"
        "../../../../attacker/evil/releases/download/v1/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl",
        "kernel_wheel.url: Value error, must be a plain URL: its path holds a '..' segment",
    ),
    "lock-kernel-url-encoded-dots": lock_plan_gpu(
        "https://github.com/Dao-AILab/flash-attention/releases/download/"
        "%2e%2e/%2e%2e/attacker/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl",
        "holds an encoded dot, slash or percent sign",
    ),
    "lock-forces-no-build": lock_env_gpu(
        {"FLASH_ATTENTION_FORCE_BUILD": "FALSE", "MAX_JOBS": "4"},
        "FLASH_ATTENTION_FORCE_BUILD='FALSE' where the profile sets 'TRUE'",
    ),
    "lock-skips-the-cuda-build": lock_env_gpu(
        {"FLASH_ATTENTION_FORCE_BUILD": "TRUE", "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE"},
        "FLASH_ATTENTION_SKIP_CUDA_BUILD, which the profile's stage does not set",
    ),
}


def test_the_two_corpora_share_no_name() -> None:
    assert not set(MORE) & set(CASES)


def test_the_whole_corpus_has_at_least_200_cases() -> None:
    """Issue 32: the review ran 181 malformed inputs; the corpus the suite runs holds more."""
    assert len(CASES) + len(MORE) >= 200, len(CASES) + len(MORE)


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_bad_input_is_refused_cleanly(
    name: str,
    tmp_path: Path,
    served: tuple[Path, str],  # noqa: F811 - the runner's fixture, imported
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(CASES, name, MORE[name])
    _run_one(name, tmp_path, served, monkeypatch, capsys)


def test_json_nested_just_within_the_bound_still_parses() -> None:
    """The depth guard refuses abuse, not JSON: 64 levels (strings with brackets in them too)."""
    from verl_bootstrap.safety import jsontext  # noqa: PLC0415

    text = "[" * 64 + '"[[[{{{"' + "]" * 64
    assert json.dumps(jsontext.loads(text)).count("[") == 64 + 3
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 64"):
        jsontext.loads("[" * 65 + "]" * 65)
