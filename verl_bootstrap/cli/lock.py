"""Subcommands of the lock feature: `lock` (resolve, write, `--check`) and `export`; also the
`verify --against LOCKFILE` adapter."""

from __future__ import annotations

import argparse
import datetime
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.flags import dry_run_flag, output_beside, renamed
from verl_bootstrap.cli.lockinput import lock_source_flags, named_lock, scratch_options
from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, BootstrapError, InputError

if TYPE_CHECKING:
    from verl_bootstrap.lockfile.create import LockResult
    from verl_bootstrap.lockfile.model import Lockfile
    from verl_bootstrap.profile.models import Profile

__all__ = ["cmd_export", "cmd_lock", "cmd_verify_against", "flags_export", "flags_lock"]


def flags_lock(lock: argparse.ArgumentParser) -> None:
    """lock's flags."""
    lock.add_argument("--profile", help="a shipped profile name or a YAML file")
    lock.add_argument("--cuda", help="one CUDA variant (default: every variant of the profile)")
    lock.add_argument("--platform", default="linux-64", help="linux-64 (default) or linux-aarch64")
    lock.add_argument("--all", action="store_true", help="every shipped profile and variant")
    lock.add_argument(
        "--check", action="store_true", help="exit non-zero when a committed lockfile is stale"
    )
    lock.add_argument(
        "--python-version",
        metavar="X.Y",
        type=_python_version,
        help="the Python to lock for (default: the old lock's)",
    )
    renamed(lock, "--python", "--python-version", "--python is an interpreter's path on install")
    lock.add_argument(
        "--exclude-newer",
        metavar="DATE",
        type=_cutoff,
        help="ignore files uploaded after DATE (default: kept)",
    )
    lock.add_argument(
        "--upgrade", action="store_true", help="resolve against today's index, not the old cutoff"
    )
    lock.add_argument(
        "--glibc",
        type=_glibc,
        help="the oldest glibc of the machines (default 2.28; SGLang needs 2.34)",
    )
    lock.add_argument("-o", "--output", type=path_arg, help="where to write (one lockfile only)")
    lock.add_argument(
        "--dir",
        type=path_arg,
        help="the lockfiles folder to write (default: lockfiles/ in the current folder)",
    )
    dry_run_flag(lock, "name each lockfile it would write or regenerate")
    lock_source_flags(lock)


def _python_version(value: str) -> str:
    """An argparse type: a Python version as a lock names it (3.12), checked before anything
    runs (argparse then exits 2 naming the flag, under --dry-run too)."""
    if not re.fullmatch(r"3\.[0-9]{1,2}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a Python version (write it like 3.12)")
    return value


def _glibc(value: str) -> str:
    """An argparse type: a glibc version, 2.N."""
    if not re.fullmatch(r"2\.[0-9]{1,3}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a glibc version (write it like 2.34)")
    return value


def _cutoff(value: str) -> str:
    """An argparse type: a date or an ISO time (the lock records it as UTC)."""
    try:
        datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        msg = f"{value!r} is not a date or time (write it like 2026-12-01 or 2026-12-01T12:00:00Z)"
        raise argparse.ArgumentTypeError(msg) from None
    return value


def flags_export(export: argparse.ArgumentParser) -> None:
    """export's flags."""
    from verl_bootstrap.export.names import FORMATS

    export.add_argument("--format", required=True, choices=FORMATS, help="the tool's format")
    export.add_argument("--lockfile", type=path_arg, help="the lockfile (default: the profile's)")
    export.add_argument("--profile", help="the profile whose committed lockfile to export")
    export.add_argument(
        "--cuda", help="the variant's lockfile (default: the profile's variant that has one)"
    )
    export.add_argument(
        "--platform", default="linux-64", help="linux-64 (default) or linux-aarch64"
    )
    export.add_argument(
        "-o",
        "--output",
        type=path_arg,
        help="pylock, conda-lock: a file, or - for stdout (the default); requirements: a folder "
        "(default requirements/); apptainer, dockerfile: the definition file (default verl.def, "
        "Dockerfile), its lockfile and wheel beside it",
    )
    export.add_argument("--force", action="store_true", help="overwrite files that are there")
    export.add_argument(
        "--bundle", type=path_arg, help="apptainer/dockerfile: build from this bundle (no network)"
    )
    export.add_argument("--base", help="apptainer/dockerfile: the base image (default: python)")
    dry_run_flag(export, "name the files it would write")
    lock_source_flags(export)


def cmd_lock(ns: argparse.Namespace) -> int:
    """`lock`: write lockfiles, or with --check say which committed ones are stale."""

    if ns.check:
        return _check(ns)
    targets = _targets(ns)
    if ns.dry_run:
        return _lock_dry_run(ns, targets)
    said: set[str] = set()  # a note (an unreachable index) is said once per run, not per lockfile
    results = [_lock_one(ns, p, v, single=len(targets) == 1, said=said) for p, v in targets]
    failed = any("error" in r for r in results)
    if ns.json:
        emit_json({"schema": "verl-bootstrap.lock/1", "ok": not failed, "lockfiles": results})
    return EXIT_STEP_FAILED if failed else EXIT_OK


def _lock_path(ns: argparse.Namespace, profile: str, variant: str, *, single: bool) -> Path:
    """Where one lockfile goes: --output (one lockfile), else its place in --dir, else in the
    current folder's lockfiles/ (never the tool's own shipped copy, which installs trust)."""
    from verl_bootstrap.paths import default_lockfile

    if ns.output is not None and single:
        return Path(ns.output)
    return default_lockfile(Path(profile).stem, variant, ns.platform, ns.dir or _OWN_FOLDER)


_OWN_FOLDER = Path("lockfiles")  # relative: the current folder's


def shown_path(path: Path) -> str:
    """A path as the user reads it: relative to the current folder when under it, else whole."""
    whole = path.absolute()
    try:
        return str(whole.relative_to(Path.cwd()))
    except ValueError:
        return str(whole)


def _lock_dry_run(ns: argparse.Namespace, targets: list[tuple[str, str]]) -> int:
    """`lock --dry-run`: each lockfile it would write (new) or regenerate (there); nothing runs."""
    single = len(targets) == 1
    rows = []
    for profile, variant in targets:
        path = _lock_path(ns, profile, variant, single=single)
        state = "would regenerate" if path.is_file() else "would write"
        row = {"profile": profile, "variant": variant, "path": str(path.absolute())}
        rows.append({**row, "state": state})
    if ns.json:
        emit_json(
            {"schema": "verl-bootstrap.lock/1", "ok": True, "dry_run": True, "lockfiles": rows}
        )
    for row in [] if ns.json else rows:
        where = shown_path(Path(row["path"]))
        out(f"{row['state']} {where} ({row['profile']} {row['variant']} {ns.platform})")
    return EXIT_OK


def _lock_one(
    ns: argparse.Namespace, profile: str, variant: str, *, single: bool, said: set[str]
) -> dict[str, Any]:
    """Lock one profile variant, with a live line while it resolves; a failure is reported and
    the others still run."""
    import time

    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.events import listening
    from verl_bootstrap.kernels.lockwheels import record_kernel_wheels
    from verl_bootstrap.lockfile.create import LockRequest, lock_profile

    path = _lock_path(ns, profile, variant, single=single)
    request = LockRequest(
        options=scratch_options(ns, profile, variant),
        platform=ns.platform,
        python=ns.python_version,
        exclude_newer=ns.exclude_newer,
        output=path,
        upgrade=ns.upgrade,
        glibc=ns.glibc,
        base=None if ns.dir or ns.output else _shipped(profile, variant, ns.platform),
    )
    existed = path.is_file()  # what the changes are said against (not the shipped base)
    started = time.monotonic()
    try:
        with (
            Console(quiet=ns.json) as console,
            listening(console),
            console.activity("lock", f"resolving {profile} {variant} ({ns.platform})"),
        ):
            result = lock_profile(request, after=record_kernel_wheels(request.options))
    except BootstrapError as exc:
        err(f"✗ {profile} {variant}: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else ""))
        return {"profile": profile, "variant": variant, "error": exc.message}
    for note in result.notes:
        if note not in said:
            said.add(note)
            err(f"note: {note}")
    previous = result.previous if existed else None
    seconds = time.monotonic() - started
    return _said_lock(ns, profile, variant, result, previous=previous, seconds=seconds)


def _shipped(profile: str, variant: str, platform: str) -> Path:
    """The tool's own lockfile of a profile variant: a new lockfile in the current folder keeps
    its Python, cutoff and backend, as a re-lock of it did."""
    from verl_bootstrap.paths import LOCKFILES_DIR, default_lockfile

    return default_lockfile(Path(profile).stem, variant, platform, LOCKFILES_DIR)


def _said_lock(
    ns: argparse.Namespace,
    profile: str,
    variant: str,
    result: LockResult,
    *,
    previous: Lockfile | None,
    seconds: float,
) -> dict[str, Any]:
    """What one lock resolved, what changed against the lockfile it replaced, where it went."""
    from verl_bootstrap.lifecycle.update import version_diff

    lock = result.lock
    packages = len(lock.distributions()) + len(lock.conda)
    changes = version_diff(previous, lock) if previous is not None else None
    state = "wrote" if result.changed else "unchanged"
    if not ns.json:
        err(f"resolved {packages} packages in {seconds:.1f}s")
        if changes is None:
            err("  a new lockfile (no previous one to compare with)")
        for change in changes or ():
            err(f"  {change.line()}")
        if changes == ():
            err("  no version changed against the previous lockfile")
        out(f"{state} {shown_path(result.path)}")
    return {
        "profile": profile,
        "variant": variant,
        "path": str(result.path.absolute()),
        "state": state,
        "packages": packages,
        "changes": None
        if changes is None
        else [{"name": c.name, "old": c.old, "new": c.new} for c in changes],
    }


def _targets(ns: argparse.Namespace) -> list[tuple[str, str]]:
    """(profile, variant) pairs to lock; with --all, profiles that run a script are skipped."""
    from verl_bootstrap.host.variants import known_variant
    from verl_bootstrap.profile import list_profiles, load_profile

    if ns.all:
        names = list_profiles()
    elif ns.profile:
        names = [ns.profile]
    else:
        raise InputError("lock: pass --profile NAME or --all")
    targets: list[tuple[str, str]] = []
    for name in names:
        profile = load_profile(name)
        if ns.all and any(stage.kind == "script" for stage in profile.stages):
            err(
                f"· {name}: skipped, it runs verl's install script (what a script installs "
                "cannot be locked)"
            )
            continue
        if ns.cuda and ns.cuda not in profile.cuda_variants and ns.all:
            continue  # --all --cuda X: the profiles that have X
        if ns.cuda:  # bad input is refused before anything is resolved
            known_variant(profile, ns.cuda)
        variants = [ns.cuda] if ns.cuda else list(profile.cuda_variants)
        targets.extend((name, v) for v in variants)
    if ns.output is not None and len(targets) != 1:
        raise InputError("--output needs exactly one lockfile: pass --profile and --cuda")
    return targets


def _check(ns: argparse.Namespace) -> int:
    from verl_bootstrap.lockfile.drift import committed_lockfiles, stale_lockfile
    from verl_bootstrap.paths import LOCKFILES_DIR

    paths = committed_lockfiles(ns.dir or LOCKFILES_DIR, ns.profile)
    verdicts = [stale_lockfile(p) for p in paths]
    gaps = {str(p): _extras_gaps(ns, p) for p in paths}
    stale = [v for v in verdicts if v.reason or _differences(gaps[str(v.path)])]
    if ns.json:
        body = [
            {
                "path": str(v.path),
                "stale": v.reason,
                "regenerate": v.regenerate,
                "verl_extras": gaps[str(v.path)],
            }
            for v in verdicts
        ]
        emit_json({"schema": "verl-bootstrap.lock-check/1", "ok": not stale, "lockfiles": body})
    else:
        for v in verdicts:
            found = gaps[str(v.path)]
            differences = _differences(found)
            bad = v.reason or (
                f"{len(differences)} difference(s) from verl's contract" if differences else None
            )
            out(f"{'✗ stale' if bad else '✓ current'} {v.path}" + (f": {bad}" if bad else ""))
            for line in found:
                out(f"    {line}")
            if bad and v.regenerate:
                out(f"    regenerate: {v.regenerate}")
        out(
            f"{len(stale)} of {len(verdicts)} lockfile(s) stale"
            if stale
            else f"{len(verdicts)} lockfile(s) current"
        )
    return EXIT_STEP_FAILED if stale else EXIT_OK


def _uv_lock_gaps(lock: Lockfile, profile: Profile, checkout: Path, work: Path) -> list[str]:
    """Where the lock is not verl's uv.lock, for the stack that lock is made for."""
    from verl_bootstrap.lockfile.declared import declared_extras
    from verl_bootstrap.lockfile.uvlock import applies_to, export_uv_lock, uv_lock_gaps

    variant = lock.cuda.variant
    if not applies_to(profile, variant, lock.python, lock.platform):
        return []
    extras = declared_extras(profile, variant)
    pins = export_uv_lock(checkout, extras, lock.python, lock.platform, work)
    subs = [s for s in profile.substitutions if s.applies(variant)]
    return uv_lock_gaps(lock.distributions(), pins, subs) if pins else []


def _differences(lines: list[str]) -> list[str]:
    """The lines that make a lock stale (not those naming what could not be checked here)."""
    from verl_bootstrap.lockfile.contract import UNCHECKED

    return [line for line in lines if not line.startswith(UNCHECKED)]


def _extras_gaps(ns: argparse.Namespace, path: Path) -> list[str]:
    """What the lockfile lacks or pins otherwise of verl's declared extras, where it leaves
    verl's [tool.uv] contract without a stated substitution, and where its pins break their
    own metadata (lines)."""
    import tempfile

    from verl_bootstrap.lockfile import read_lockfile
    from verl_bootstrap.lockfile.contract import MetadataCheck, contract_gaps, metadata_gaps
    from verl_bootstrap.lockfile.create import verl_pyproject
    from verl_bootstrap.lockfile.declared import declared_extras, extras_gaps
    from verl_bootstrap.lockfile.origins import lock_index_settings
    from verl_bootstrap.profile import load_profile
    from verl_bootstrap.profile.stacks import apply_stack

    try:
        lock = read_lockfile(path)
        profile = apply_stack(
            load_profile(lock.profile), lock.verl.ref, allow_unsupported=lock.allow_unsupported_ref
        )
        if not declared_extras(profile, lock.cuda.variant):
            return []
        options = scratch_options(ns, lock.profile, lock.cuda.variant)
        with tempfile.TemporaryDirectory(prefix="verl-lock-check-") as work:
            pyproject = verl_pyproject(profile, options, Path(work))
            check = MetadataCheck(lock_index_settings(lock, options), Path(work), ns.offline)
            return [
                *(g.line() for g in extras_gaps(lock, profile, pyproject)),
                *contract_gaps(lock, profile, pyproject),
                *_uv_lock_gaps(lock, profile, pyproject.parent, Path(work)),
                *metadata_gaps(lock, profile, pyproject, check),
            ]
    except BootstrapError as exc:
        return [f"cannot compare with verl's extras: {exc.message}"]


def cmd_export(ns: argparse.Namespace) -> int:
    """`export --format F`: the lockfile in conda-lock, PEP 751 or hashed-requirements form."""
    from verl_bootstrap.export.names import CONTAINER_FORMATS
    from verl_bootstrap.export.write import DEFAULT_OUTPUT, export_lockfile
    from verl_bootstrap.lockfile.origins import lock_channels, lock_index_settings

    lock, path = named_lock(ns)
    to_stdout = ns.format in STDOUT_FORMATS and ns.output in (None, Path("-"))
    if ns.output == Path("-") and not to_stdout:
        raise InputError(f"--output -: {ns.format} writes several files", hint="name a path")
    if to_stdout and ns.json:
        raise InputError("--json reports the files written: pass --output FILE with it")
    output = ns.output or DEFAULT_OUTPUT[ns.format]
    if not to_stdout:
        _refuse_overwrite(output_beside(output), force=ns.force)
    if ns.dry_run:
        return _export_dry_run(ns, lock, path, None if to_stdout else output)
    if ns.format in CONTAINER_FORMATS:
        from verl_bootstrap.export.containerfmt import write_container

        written = write_container(lock, path, ns.format, output, bundle=ns.bundle, base=ns.base)
        return _report_export(ns, path, written)
    options = scratch_options(ns, lock.profile, lock.cuda.variant)
    with tempfile.TemporaryDirectory(prefix="verl-bootstrap-export-") as scratch:
        written = export_lockfile(
            lock,
            ns.format,
            Path(scratch) / DEFAULT_OUTPUT[ns.format].name if to_stdout else output,
            settings=lock_index_settings(lock, options),
            channels=lock_channels(lock, options),
            offline=ns.offline,
        )
        if to_stdout:  # the file's text is the output, as `uv export` does
            out(written[0].read_text(encoding="utf-8").rstrip("\n"))
            return EXIT_OK
    return _report_export(ns, path, written)


def _export_dry_run(
    ns: argparse.Namespace, lock: Lockfile, lockfile: Path, output: Path | None
) -> int:
    """`export --dry-run`: the files it would write (None: stdout), from which lockfile."""
    from verl_bootstrap.export.container import LOCKFILE_NAME
    from verl_bootstrap.export.names import CONTAINER_FORMATS

    if output is None:
        files = ["-"]
    elif ns.format in CONTAINER_FORMATS and ns.bundle is None:
        folder = output.parent.absolute()
        files = [str(output), str(folder / LOCKFILE_NAME), str(folder / "verl_bootstrap-*.whl")]
    elif ns.format == "requirements":
        hashed = [s.id for s in lock.stages if s.kind != "install-verl"]  # as write_requirements
        files = [str(output / f"{n:02d}-{stage}.txt") for n, stage in enumerate(hashed, start=1)]
    else:
        files = [str(output)]
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.export/1",
                "dry_run": True,
                "lockfile": str(lockfile),
                "files": files,
            }
        )
        return EXIT_OK
    for file in files:
        what = "print it to stdout" if file == "-" else f"write {file}"
        out(f"would {what} ({ns.format}, from {lockfile})")
    return EXIT_OK


STDOUT_FORMATS = ("pylock", "conda-lock")  # one file each: stdout unless --output names one


def _refuse_overwrite(output: Path, *, force: bool) -> None:
    """Files the user has are theirs: export replaces one only when told to."""
    if output.exists() and not force:
        raise InputError(
            f"{output} is already there; export does not overwrite it",
            hint="pass --force to replace it, or --output another path",
        )


def _report_export(ns: argparse.Namespace, path: Path, written: list[Path]) -> int:
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.export/1",
                "lockfile": str(path),
                "files": [str(w) for w in written],
            }
        )
    else:
        for file in written:
            out(f"wrote {file}")
    return EXIT_OK


def _against(prefix: Path, given: Path) -> Path:
    """The lockfile to compare with: the one given, else the one the env was installed from."""
    from verl_bootstrap.cli.flags import AGAINST_ITS_OWN
    from verl_bootstrap.lifecycle.record import read_record

    if given != AGAINST_ITS_OWN:
        return given
    record = read_record(prefix) or {}
    lock = record.get("lockfile")
    if not isinstance(lock, dict) or not lock.get("path"):
        raise InputError(
            f"{prefix} was not installed from a lockfile ({record.get('route') or 'no record'})",
            hint="pass --against LOCKFILE to compare it with one",
        )
    return Path(str(lock["path"]))


def cmd_verify_against(ns: argparse.Namespace) -> int:
    """`verify --prefix P --against LOCKFILE`: every difference; non-zero on any."""
    from verl_bootstrap.lifecycle.runlog import record_verify
    from verl_bootstrap.lockfile import read_lockfile
    from verl_bootstrap.lockfile.drift import compare_env

    if not (ns.prefix / "bin" / "python").exists():
        raise InputError(f"{ns.prefix} is not an env (it has no bin/python)")
    ns.against = _against(ns.prefix, ns.against)
    lock = read_lockfile(ns.against)
    compared = compare_env(ns.prefix, lock)
    found, unknown, held = compared.differences, not compared.hashes_checked, compared.held
    record_verify(  # `envs list` and `info` show it, as a plain verify's
        ns.prefix, ok=not found, failed=[f"{d.kind} {d.name}" for d in found], against=ns.against
    )
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.verify-against/1",
                "ok": not found,
                "lockfile": str(ns.against),
                "hashes_checked": not unknown,
                "differences": [d.__dict__ for d in found],
                "held_by_whole_wheels": held,
            }
        )
    else:
        for difference in found:
            out(difference.line())
        for whole in sorted(set(held.values())):
            parts = ", ".join(sorted(n for n, w in held.items() if w == whole))
            out(f"note: {parts}: not installed, held by the whole {whole} wheel taken in place")
        if unknown:
            out(
                "note: the env has no record of the artifacts it was installed from "
                "(not installed with --locked): hashes were not compared"
            )
        out(
            f"{len(found)} difference(s) from {ns.against}"
            if found
            else f"the env matches {ns.against}"
        )
    return EXIT_STEP_FAILED if found else EXIT_OK
