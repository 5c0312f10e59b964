"""What the kernel commands decide. `wheelhouse`: the wheelhouse they work on (--wheelhouse, else
the site config's, else the tool home's) and the build key of a wheel to publish, stated or
probed, and complete (a key is never guessed). `kernels coverage`: which recorded list it reads
(and, with --refresh, asks again), and the coverage rows of the shipped stacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.kernels.coverage import CoverageRow, coverage
from verl_bootstrap.kernels.host import open_wheelhouse
from verl_bootstrap.kernels.key import FIELDS, BuildKey
from verl_bootstrap.kernels.record import KernelRecord, load_record, record_path
from verl_bootstrap.kernels.remotehouse import AnyWheelhouse
from verl_bootstrap.kernels.wheelhouse import check_key
from verl_bootstrap.profile.load import PROFILES_DIR

__all__ = ["CoverageReport", "chosen_wheelhouse", "coverage_report", "publish_key"]


def chosen_wheelhouse(
    given: str | None, config: str | None, environ: Mapping[str, str]
) -> AnyWheelhouse:
    """--wheelhouse, else the wheelhouse of the site config (`config`, or the usual files)."""
    configured = given or None
    if configured is None:
        from verl_bootstrap.siteconfig import load_site  # noqa: PLC0415 (only when not given)

        configured = load_site(config).config.wheelhouse
    return open_wheelhouse(configured, environ)


def publish_key(stated: str | None, key_of: Path | None, *, hint: str) -> BuildKey:
    """The key a wheel is published with: probed from the env at `key_of`, else `stated`
    (FIELD=VALUE,...); InputError (with `hint`, how to write one) unless it names every field."""
    key = _probed(key_of) if key_of is not None else _stated(stated or "")
    if not key.complete:
        raise InputError(
            f"the key {key.describe()} is incomplete: a wheel is only used for an env it matches "
            "in every field",
            hint=hint,
        )
    return key


def _probed(prefix: Path) -> BuildKey:
    """The key of the env at `prefix`, asked of its own interpreter."""
    from verl_bootstrap.kernels.probe import probe_key  # noqa: PLC0415 (runs the env's python)

    python = env_python(prefix)
    if not python.is_file():
        raise InputError(
            f"--key-of {prefix}: no env there ({python} does not exist)",
            hint="pass the --prefix of an env verl-bootstrap built, or state --key",
        )
    return probe_key(python)


def _stated(text: str) -> BuildKey:
    """--key FIELD=VALUE,...: known fields only, each value checked before anything is written
    where a lab reads it."""
    pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
    if any(len(p) != 2 for p in pairs):
        raise InputError(f"--key {text!r}: write it as FIELD=VALUE,... ({', '.join(FIELDS)})")
    unknown = sorted({k.strip() for k, _ in pairs} - set(FIELDS))
    if unknown:
        raise InputError(
            f"--key: unknown field(s) {', '.join(unknown)} (known: {', '.join(FIELDS)})"
        )
    given = {k.strip(): v.strip() for k, v in pairs}
    check_key(given, "--key")
    return BuildKey.from_mapping(given)


@dataclass(frozen=True)
class CoverageReport:
    """`kernels coverage`: the recorded list read (after a refresh, the fresh one), the sources
    that could not be asked (their recorded lists kept), a refresh's notes, and the rows."""

    path: Path
    record: KernelRecord
    failed: tuple[str, ...]
    notes: tuple[str, ...]
    rows: list[CoverageRow]


def coverage_report(
    record_file: Path | None,
    *,
    profiles: Sequence[str] | None,
    config: str | None,
    refresh: bool,
    dry_run: bool,
) -> CoverageReport:
    """The coverage of the profiles beside `record_file` (default: the shipped profiles' list),
    in the source order of the site config `config` when one is given; `refresh` asks each
    source again and rewrites the list (unless `dry_run`)."""
    path = record_file or record_path(PROFILES_DIR / "fsdp.yaml")
    # the recorded lists of a profiles folder sit in its kernel-wheels/ (record_path)
    search = path.parent.parent if path.parent.name == "kernel-wheels" else PROFILES_DIR
    order = None
    if config:
        from verl_bootstrap.siteconfig import load_site  # noqa: PLC0415 (only with --config)

        order = load_site(config).config.kernel_sources
    record, failed, notes = load_record(path), tuple[str, ...](), tuple[str, ...]()
    if refresh:
        from verl_bootstrap.kernels.refresh import refresh_record  # noqa: PLC0415 (the network's)

        refreshed = refresh_record(path, record, search=search, write=not dry_run)
        record, failed, notes = refreshed.record, refreshed.failed, refreshed.notes
    rows = coverage(record, profiles=profiles or None, order=order, search=search)
    return CoverageReport(path, record, failed, notes, rows)
