"""The declared prebuilt sources of the shipped kernel stages, read against their recorded lists
(profiles/kernel-wheels/recorded.yaml): which one each default stack takes, the order of trust, a
site config turning a source off, a key mismatch refused, and the plan on recorded hosts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_kernels_plan import H100, driver, host, plan_for

from verl_bootstrap import cli
from verl_bootstrap.cli.planview import plan_json
from verl_bootstrap.errors import InputError
from verl_bootstrap.kernels.coverage import CoverageRow, coverage
from verl_bootstrap.kernels.kernelchoice import KernelQuery, LockPins, candidates, choose
from verl_bootstrap.kernels.key import BuildKey, parse_wheel_name
from verl_bootstrap.kernels.record import load_record, record_path
from verl_bootstrap.kernels.sources import KernelChoice, Passed
from verl_bootstrap.lock.format import LockedDist, LockedStage
from verl_bootstrap.lock.io import read_lockfile
from verl_bootstrap.lock.making.kernelwheels import lock_kernel_wheels
from verl_bootstrap.machine.gpu.smiparse import parse_smi_xml
from verl_bootstrap.profile import load_profile
from verl_bootstrap.profile.load import PROFILES_DIR
from verl_bootstrap.profile.stacks import apply_stack

NVIDIA = Path(__file__).parent / "data" / "nvidia"
RECORD = record_path(PROFILES_DIR / "fsdp.yaml")
VERL = "https://github.com/verl-project/verl-wheelhouse/releases/download/"
COMMUNITY = "https://github.com/mjun0812/flash-attention-prebuild-wheels/releases/download/"
DEFAULTS = [
    (p, v, a)
    for p in ("fsdp", "megatron", "sglang")
    for v in ("cu128", "cu130")
    for a in ("linux_x86_64", "linux_aarch64")
]


def passed_over(passed: Sequence[Passed]) -> set[tuple[str, str]]:
    """(source, cause) for each source a choice's list passed over."""
    return {(source, p.cause) for p in passed for source in p.sources}


def _row(
    rows: list[CoverageRow], profile: str, variant: str, platform: str, stage: str
) -> CoverageRow:
    found = [
        r
        for r in rows
        if (r.profile, r.variant, r.platform, r.stage) == (profile, variant, platform, stage)
    ]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_BOOTSTRAP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MAX_JOBS", raising=False)


def test_every_default_stack_takes_a_prebuilt_flash_attn_from_the_recorded_lists() -> None:
    rows = coverage(load_record(RECORD))
    for profile, variant, platform in DEFAULTS:
        row = _row(rows, profile, variant, platform, "flash-attn")
        assert row.wheel is not None, row
        assert row.key.python == "cp312" and row.key.platform == platform
        assert row.wheel.endswith(f"-cp312-cp312-{platform}.whl")
    # the most trusted source that has the file wins: verl's for its own stack, else community
    cu130 = _row(rows, "fsdp", "cu130", "linux_x86_64", "flash-attn")
    assert (cu130.source, cu130.trust) == ("verl-wheelhouse", "project")
    assert (
        cu130.wheel == VERL + "flash-attention-v2.8.3/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    )
    cu128 = _row(rows, "fsdp", "cu128", "linux_x86_64", "flash-attn")
    assert (cu128.source, cu128.trust) == ("community", "community")
    assert (
        cu128.wheel
        == COMMUNITY + "v0.9.0/flash_attn-2.8.3+cu128torch2.10-cp312-cp312-linux_x86_64.whl"
    )
    arm = _row(rows, "megatron", "cu130", "linux_aarch64", "flash-attn")
    assert arm.source == "community" and arm.wheel is not None and "cu130torch2.11" in arm.wheel
    sglang = _row(rows, "sglang", "cu128", "linux_x86_64", "flash-attn")
    assert sglang.wheel is not None and "cu128torch2.9-" in sglang.wheel  # its torch is 2.9.1


def test_megatron_cu130_takes_verls_whole_transformer_engine_on_x86_64() -> None:
    rows = coverage(load_record(RECORD), profiles=["megatron"])
    te = _row(rows, "megatron", "cu130", "linux_x86_64", "transformer-engine")
    assert (te.source, te.trust) == ("verl-wheelhouse", "project")
    assert te.wheel == (
        VERL + "transformer-engine-v2.16.1/transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl"
    )
    assert te.why == "listed 2026-12-04"


def test_a_stage_no_source_serves_says_why_and_what_a_build_costs() -> None:
    rows = coverage(load_record(RECORD), profiles=["megatron"])
    sdist = "the default index has transformer-engine-torch only as an sdist"
    cost = "a source build takes about 1.6 min on 16 cores"  # host code: as long for any GPUs
    # cu128 pins verl's TE 2.16.1 too, which verl's wheelhouse builds for torch 2.11 + cu130 only
    for variant, platform, cause in (
        ("cu128", "linux_x86_64", "other-build"),
        ("cu128", "linux_aarch64", "other-build"),
        ("cu130", "linux_aarch64", "no-version"),  # TE 2.12.0, the core that links there
    ):
        te = _row(rows, "megatron", variant, platform, "transformer-engine")
        assert te.source == "source build" and te.wheel is None
        assert passed_over(te.passed) == {("verl-wheelhouse", cause)}, te.passed
        assert "(recorded" in te.why
        assert "torch 2.11.0+cu130 on linux_x86_64 only" in te.why  # what verl's wheelhouse has
        assert sdist in te.why and cost in te.why


def test_a_site_config_turns_a_source_off_and_reorders() -> None:
    record = load_record(RECORD)
    only_upstream = coverage(record, profiles=["fsdp"], order=("wheelhouse", "official"))
    row = _row(only_upstream, "fsdp", "cu130", "linux_x86_64", "flash-attn")
    assert row.source == "source build"
    assert passed_over(row.passed) == {
        ("wheelhouse", "no-version"),  # the lab wheelhouse: none here
        ("verl-wheelhouse", "off"),
        ("community", "off"),
        ("official", "other-build"),
    }
    community_first = coverage(record, profiles=["fsdp"], order=("community", "verl-wheelhouse"))
    row = _row(community_first, "fsdp", "cu130", "linux_x86_64", "flash-attn")
    assert row.source == "community" and row.wheel is not None
    assert row.wheel.endswith(
        "/v0.9.4/flash_attn-2.8.3+cu130torch2.11-cp312-cp312-linux_x86_64.whl"
    )


def test_a_listed_wheel_for_another_torch_is_never_taken() -> None:
    profile = load_profile("fsdp")
    kernel = next(s.kernel for s in profile.stages if s.kernel)
    record = load_record(RECORD)
    # torch 2.12 is in no recorded list: nothing is taken, every source says what it has
    key = BuildKey("2.12.0", "13.0", True, "cp312", "linux_x86_64")
    choice = choose(KernelQuery(kernel, "2.8.3", key, record=record))
    assert choice.source == "build"
    assert {("community", "other-build"), ("verl-wheelhouse", "other-build")} <= passed_over(
        choice.passed
    )
    # the pre-C++11 ABI: the community's stated ABI does not fit, nor does verl's
    old_abi = BuildKey("2.10.0", "12.8", False, "cp312", "linux_x86_64")
    assert choose(KernelQuery(kernel, "2.8.3", old_abi, record=record)).source == "build"


def test_a_locked_sdist_takes_the_resolving_routes_wheel_only_for_the_envs_real_key() -> None:
    """The lockfile route, with no wheel recorded: the same choice as the resolving route, made
    again with the env's real key when the stage runs (another torch: the locked sdist builds)."""
    kernel = next(s.kernel for s in load_profile("fsdp").stages if s.kernel)
    record = load_record(RECORD)
    dist = LockedDist(name="flash-attn", version="2.8.3", source="sdist", hashes=("a" * 64,))
    planned = BuildKey("2.11.0", "13.0", True, "cp312", "linux_x86_64")

    def locked_choices(
        key: BuildKey, order: tuple[str, ...] | None = None, online: bool = True
    ) -> tuple[KernelChoice, ...]:
        """The locked route's candidates for `dist` (the one list both routes share)."""
        pins = LockPins(dist, online=online)
        query = KernelQuery(kernel, dist.version, key, record=record, order=order, lock=pins)
        return candidates(query).choices

    first, *rest = locked_choices(planned)
    resolving = choose(KernelQuery(kernel, "2.8.3", planned, record=record))
    assert (first.origin, first.wheel, first.unpinned) == (resolving.origin, resolving.wheel, True)
    assert rest[-1].source == "build"  # after every source's wheel, as a download fails
    # the env's real torch is another: no source's wheel is taken, and the build says why
    real = BuildKey("2.12.0", "13.0", True, "cp312", "linux_x86_64")
    [build] = locked_choices(real)
    assert build.source == "build" and not build.unpinned
    assert ("verl-wheelhouse", "other-build") in passed_over(build.passed)
    # only what the lockfile pins: the sources turned off, or not asked offline
    [off] = locked_choices(planned, order=("wheelhouse",))
    assert off.source == "build"
    off_ones = {s for s, cause in passed_over(off.passed) if cause == "off"}
    assert off_ones == {"official", "verl-wheelhouse", "community"}
    [offline] = locked_choices(planned, online=False)
    assert offline.source == "build"
    assert ("verl-wheelhouse", "offline") in passed_over(offline.passed)


def test_the_official_release_serves_the_torch_it_was_built_for() -> None:
    profile = load_profile("fsdp")
    kernel = next(s.kernel for s in profile.stages if s.kernel)
    key = BuildKey("2.8.0", "12.8", True, "cp312", "linux_x86_64")
    choice = choose(KernelQuery(kernel, "2.8.3", key, record=load_record(RECORD)))
    assert (choice.origin, choice.trust) == ("official", "upstream")
    assert choice.wheel is not None and choice.wheel.endswith(
        "/v2.8.3/flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
    )


def test_community_names_state_cuda_without_a_dot_and_no_abi() -> None:
    pattern = "https://x/{tag}/flash_attn-{version}+{cuda_tag}torch{torch_minor}-{python}-{python}-{platform}.whl"
    got = parse_wheel_name(pattern, "flash_attn-2.8.3+cu130torch2.11-cp312-cp312-linux_aarch64.whl")
    assert got == ("2.8.3", BuildKey("2.11", "13.0", None, "cp312", "linux_aarch64"))


def _plan_kernel(
    profile: str, tmp_path: Path, found: object, cuda: str | None = None
) -> tuple[dict, str]:
    opts = {"cuda": cuda} if cuda else {}
    options, facts = host(profile, tmp_path, found, cores=16, ram=64.0, **opts)  # type: ignore[arg-type]
    plan = plan_for(profile, options, facts)
    return plan_json(plan), "\n".join(s.description for s in plan.steps)


def test_plan_fsdp_on_a_recorded_cu130_host_names_a_prebuilt_flash_attn(tmp_path: Path) -> None:
    body, text = _plan_kernel("fsdp", tmp_path, driver(H100))  # a 590 driver: cu130
    kernel = next(s for s in body["steps"] if s["id"] == "flash-attn")["kernel"]
    assert kernel["source"] == "index" and kernel["origin"] == "verl-wheelhouse"
    assert kernel["trust"] == "project"
    assert kernel[
        "wheel"
    ] == VERL + "flash-attention-v2.8.3/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl" or (
        kernel["expected_key"]["platform"] != "linux_x86_64"
    )
    assert kernel["built_for"]["torch"] == "2.11.0" and kernel["built_for"]["cuda"] == "13.0"
    assert "source build" not in text and "verl-wheelhouse (trust: project" in text


def test_plan_fsdp_on_a_recorded_cu128_host_names_a_prebuilt_flash_attn(tmp_path: Path) -> None:
    recorded = parse_smi_xml((NVIDIA / "570.124.04-RTX3060-qx.xml").read_text("utf-8"))
    assert recorded is not None and recorded.version.startswith("570")  # below 580: cu128
    body, text = _plan_kernel("fsdp", tmp_path, recorded)
    kernel = next(s for s in body["steps"] if s["id"] == "flash-attn")["kernel"]
    assert kernel["expected_key"]["torch"] == "2.10.0" and kernel["expected_key"]["cuda"] == "12.8"
    assert kernel["source"] == "release" and kernel["origin"] == "community"
    platform = kernel["expected_key"]["platform"]
    assert kernel[
        "wheel"
    ] == f"{COMMUNITY}v0.9.0/flash_attn-2.8.3+cu128torch2.10-cp312-cp312-{platform}.whl" or (
        platform not in {"linux_x86_64", "linux_aarch64"}
    )
    assert "source build" not in text and "community (trust: community" in text


def test_plan_megatron_on_a_recorded_cu130_host_names_prebuilt_kernels(tmp_path: Path) -> None:
    """Both kernel stages of the megatron stack come prebuilt on a recorded H100 host (a 590
    driver: cu130): flash-attn and one whole TransformerEngine wheel, from verl's wheelhouse."""
    body, text = _plan_kernel("megatron", tmp_path, driver(H100))
    kernels = {s["id"]: s["kernel"] for s in body["steps"] if s.get("kernel")}
    te, flash = kernels["transformer-engine"], kernels["flash-attn"]
    platform = te["expected_key"]["platform"]
    assert te["expected_key"]["torch"] == "2.11.0" and te["expected_key"]["cuda"] == "13.0"
    if platform != "linux_x86_64":  # verl's wheelhouse builds x86_64 only: aarch64 builds
        assert te["source"] == "stage"
        assert {"sources": ["verl-wheelhouse"], "cause": "no-version"} in te["passed_over"]
        return
    assert (te["source"], te["origin"], te["trust"]) == ("index", "verl-wheelhouse", "project")
    assert te["wheel"] == (
        VERL + "transformer-engine-v2.16.1/transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl"
    )
    assert te["built_for"]["torch"] == "2.11.0" and te["built_for"]["cuda"] == "13.0"
    assert te["built_for"]["platform"] == "linux_x86_64"
    assert (flash["source"], flash["origin"]) == ("index", "verl-wheelhouse")
    assert flash["wheel"] == (
        VERL + "flash-attention-v2.8.3/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    )
    assert "source build" not in text
    assert "kernel: prebuilt from verl-wheelhouse (trust: project" in text
    assert "transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl" in text


def test_the_locked_megatron_route_takes_verls_whole_transformer_engine_on_x86_64(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The committed lock locks TransformerEngine's three parts from the default index (its
    extension an sdist); the default route takes verl's whole wheel in place of them on x86_64
    (its core and extension left out), and builds the extension on aarch64, where verl's
    wheelhouse has none."""
    assert cli.main(["plan", "--profile", "megatron", "--cuda", "cu130", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    step = next(s for s in body["steps"] if s["id"] == "transformer-engine")
    kernel = step["kernel"]
    if kernel["expected_key"]["platform"] != "linux_x86_64":
        assert kernel["source"] == "build", kernel
        assert {"sources": ["verl-wheelhouse"], "cause": "no-version"} in kernel["passed_over"]
        return
    assert (kernel["source"], kernel["origin"], kernel["trust"]) == (
        "index",
        "verl-wheelhouse",
        "project",
    ), kernel
    assert kernel["wheel"] == (
        VERL + "transformer-engine-v2.16.1/transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl"
    )
    assert kernel["distribution"] == "transformer-engine" and kernel["unpinned"] is True
    assert kernel["replaces"] == ["transformer-engine-cu13", "transformer-engine-torch"]
    assert step["description"].startswith(
        "2 of its 4 locked distribution(s), hash-checked but for the kernel's whole "
        "transformer-engine wheel (a hash gap, above), installed in place of the locked "
        "transformer-engine, with transformer-engine-cu13, transformer-engine-torch left out: it "
        "holds them\n"
    ), step["description"]
    kernel_line = step["description"].splitlines()[1]  # what the stage's line said, not again
    assert kernel_line.startswith("kernel: prebuilt from verl-wheelhouse") and "left out" not in (
        kernel_line
    )
    # one gap for both verl-wheelhouse wheels (flash-attn's and this one), said once
    gaps = [g for g in body["hash_gaps"] if "transformer-engine" in g]
    assert len(gaps) == 1, body["hash_gaps"]
    assert "each of kernel stages flash-attn and transformer-engine takes" in gaps[0]


def test_a_whole_wheel_holds_only_the_parts_its_source_names_and_the_kernel() -> None:
    """`replaces` names the core (either CUDA major's); only what the stage locks is left out,
    and a source without `replaces` leaves out the kernel's own distribution alone."""
    profile = load_profile("megatron")
    stage = next(s for s in profile.stages if s.id == "transformer-engine")
    assert stage.kernel is not None
    names = ("transformer-engine", "transformer-engine-cu13", "transformer-engine-torch", "einops")
    locked = LockedStage(
        id="transformer-engine",
        kind="packages",
        distributions=tuple(
            LockedDist(
                name=n,
                version="0.8.1" if n == "einops" else "2.16.1",
                source="wheel",
                hashes=("0" * 64,),  # a locked wheel always lists its sha256
            )
            for n in names
        ),
    )
    key = BuildKey("2.11.0", "13.0", True, "cp312", "linux_x86_64")
    te = LockedDist(
        name="transformer-engine-torch", version="2.16.1", source="sdist", hashes=("1" * 64,)
    )
    record = load_record(RECORD)
    pins = LockPins(te, stage=locked)
    first = candidates(KernelQuery(stage.kernel, te.version, key, record=record, lock=pins)).choices
    assert first[0].distribution == "transformer-engine" and first[0].unpinned
    assert first[0].replaces == ("transformer-engine-cu13", "transformer-engine-torch")
    bare = stage.kernel.model_copy(
        update={"sources": (stage.kernel.sources[0].model_copy(update={"replaces": ()}),)}
    )
    second = candidates(KernelQuery(bare, te.version, key, record=record, lock=pins)).choices
    assert second[0].replaces == ("transformer-engine-torch",)


def test_a_bad_recorded_list_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "recorded.yaml"
    bad.write_text(
        "schema_version: 1\nsources:\n  x:\n    recorded: 2026-12-04\n    from: here\n"
        "    wheels: ['https://user:pw@host/a.whl']\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"recorded.yaml: sources.x.wheels.0"):
        load_record(bad)


def test_kernels_coverage_prints_the_table_and_its_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["kernels", "coverage", "--profile", "fsdp", "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    assert (
        "| fsdp | cu130 | linux_x86_64 | cp312 | flash-attn | 2.11.0 | verl-wheelhouse (project) |"
        in text
    )
    assert "- community: recorded 2026-12-04 from mjun0812/flash-attention-prebuild-wheels" in text
    # by default: columns aligned for a terminal, each starting where its header does
    assert cli.main(["kernels", "coverage", "--profile", "fsdp"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["PROFILE", "CUDA", "PLATFORM"] and "|" not in lines[0]
    at = lines[0].index("SOURCE (TRUST)")
    rows = [line for line in lines[1:] if line.startswith("fsdp ")]
    assert len(rows) == 4
    assert all(row[at - 2 : at] == "  " and row[at] != " " for row in rows), rows
    assert cli.main(["kernels", "coverage", "--profile", "sglang", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert {r["profile"] for r in body["rows"]} == {"sglang"} and len(body["rows"]) == 4
    assert all(r["wheel"] for r in body["rows"])
    assert body["sources"]["verl-wheelhouse"]["recorded"] == "2026-12-04"


def test_the_kernel_pages_coverage_table_is_what_the_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["kernels", "coverage", "--format", "markdown"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    page = Path(__file__).parents[1] / "docs" / "kernels.md"
    lines = page.read_text(encoding="utf-8").splitlines()
    start = lines.index(printed[0])
    assert lines[start : start + len(printed)] == printed
    assert not lines[start + len(printed)].startswith("|")


def test_the_locked_default_route_takes_a_declared_sources_wheel_the_lock_does_not_pin(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The committed GPU locks record no kernel wheel (made without the network to GitHub): the
    default route takes the wheel the resolving route would (verl's wheelhouse on x86_64, the
    community's on aarch64) instead of building the locked sdist, and names the hash gap."""
    assert cli.main(["plan", "--profile", "fsdp", "--cuda", "cu130", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    step = next(s for s in body["steps"] if s["id"] == "flash-attn")
    kernel = step["kernel"]
    assert kernel["source"] != "build", kernel
    if not kernel["unpinned"]:  # a lock regenerated with the network records the wheel
        return
    assert step["description"].startswith(
        "1 locked distribution(s), hash-checked but for the kernel's wheel (a hash gap, above)"
    ), step["description"]
    # the sizing variables stay for a fallback build, and the plan says that is all they are for
    assert step["env"]["FLASH_ATTENTION_FORCE_BUILD"] == "TRUE"
    assert (
        "\nits build variables apply only if it falls back to building from source"
        in (step["description"])
    )
    platform = kernel["expected_key"]["platform"]
    source = "verl-wheelhouse" if platform == "linux_x86_64" else "community"
    assert kernel["origin"] == source and kernel["wheel"].endswith(f"-{platform}.whl"), kernel
    gaps = [g for g in body["hash_gaps"] if "kernel stage flash-attn" in g]
    head = (
        "not hash-checked: the prebuilt wheel kernel stage flash-attn takes in place of the sdist "
        "the lockfile pins, "
    )
    if source == "community":  # its names state torch and CUDA: the key is checked on them
        assert kernel["unnamed"] == []
        assert gaps == [
            head + "checked by its build key, which must match the env's (the lockfile records "
            "no wheel for it: the env's own lock records its source, URL and sha256)"
        ]
    else:  # verl's wheelhouse: its names state neither, so the gap says so
        assert kernel["unnamed"] == ["torch", "cuda"]
        assert gaps == [
            head + "from a source whose file names state no torch or CUDA (it may re-upload "
            "other builds under the same name), checked by nothing but the key the profile "
            "states for that source and the load check after install (the env's own lock "
            "records the file's sha256; a lock made with the network pins it)"
        ]
    assert f"hash-checked but for {len(body['hash_gaps'])} gap(s)" in body["route"]["line"]


def test_lock_records_verls_whole_transformer_engine_on_the_committed_megatron_stages(
    tmp_path: Path,
) -> None:
    """`lock` with the network, over the committed megatron cu130 x86_64 stages: the
    TransformerEngine stage pins its extension only through the meta-package, so the version is
    the lock's; verl's whole wheel is recorded on the extension, with what it holds. (The
    download stands in for GitHub, which this host does not reach: it writes known bytes.)"""
    lock = read_lockfile(
        PROFILES_DIR.parent / "lockfiles" / "megatron" / "cu130-linux-64.lock.yaml"
    )
    fetched: list[str] = []

    def fetch(url: str, dest: Path) -> None:
        fetched.append(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(url.encode())

    profile = apply_stack(load_profile("megatron"), lock.verl.ref)
    assert (lock.cuda.variant, lock.platform, lock.python) == ("cu130", "linux-64", "3.12")
    stages, notes = lock_kernel_wheels(
        lock,
        profile,
        record=load_record(RECORD),
        order=None,
        work=tmp_path,
        fetch=fetch,
    )
    dists = {d.name: d for s in stages for d in s.distributions}
    te_url = VERL + "transformer-engine-v2.16.1/transformer_engine-2.16.1-cp312-cp312-"
    te_url += "linux_x86_64.whl"
    wheel = dists["transformer-engine-torch"].kernel_wheel
    assert wheel is not None and wheel.url == te_url, notes
    assert wheel.sha256 == hashlib.sha256(te_url.encode()).hexdigest()
    assert (wheel.distribution, wheel.origin) == ("transformer-engine", "verl-wheelhouse")
    assert wheel.replaces == ("transformer-engine-cu13", "transformer-engine-torch")
    flash = dists["flash-attn"].kernel_wheel
    assert flash is not None and flash.distribution is None and flash.replaces == ()
    assert te_url in fetched
