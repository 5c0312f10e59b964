"""One adapter per subcommand: build options, call one library function, render the result."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from installer.cli import emit_json, err, out
from installer.errors import EXIT_OK, EXIT_STEP_FAILED, InputError
from installer.events import listening
from installer.options import RunOptions, default_prefix

__all__ = [
    "cmd_install",
    "cmd_plan",
    "cmd_profiles_list",
    "cmd_profiles_show",
    "cmd_profiles_validate",
    "cmd_verify",
    "install_with",
    "run_options",
]


def run_options(ns: argparse.Namespace) -> RunOptions:
    """RunOptions from the install/plan flags, over the site config's settings (flags win)."""
    from installer.indexes import parse_index_flags  # noqa: PLC0415
    from installer.siteconfig import load_site, named_indexes, site_options  # noqa: PLC0415
    from installer.siteconfig.files import local_profile, site_lockfile  # noqa: PLC0415

    site = load_site(getattr(ns, "config", None))
    profile = ns.profile or local_profile(site.config.defaults.profile or "", os.environ)
    if not profile:
        raise InputError(
            "no --profile given, and no site config names a default profile",
            hint="pass --profile NAME (see `verl-bootstrap profiles list`)",
        )
    name = profile.rsplit("/", 1)[-1].removesuffix(".yaml").removesuffix(".yml")
    envs_dir = site.config.defaults.envs_dir
    prefix = ns.prefix or (Path(envs_dir) / name if envs_dir else default_prefix(name))
    indexes = {**named_indexes(site.config), **parse_index_flags(tuple(ns.index))}
    lockfile = getattr(ns, "lockfile", None)
    if lockfile is None and (getattr(ns, "locked", False) or getattr(ns, "frozen", False)):
        lockfile = site_lockfile(site, os.environ)  # the lab's lockfile, when it names one
    return RunOptions(
        profile=profile,
        prefix=prefix.absolute(),
        backend=ns.backend,
        verl_source=ns.verl_source,
        verl_ref=ns.verl_ref,
        cuda=ns.cuda,
        indexes=tuple(indexes.items()),
        channels=tuple(ns.channel),
        installer=ns.installer,
        python=ns.python,
        conda_exe=ns.conda_exe,
        skip_checks=tuple(ns.skip_check),
        require_gpu=ns.require_gpu,
        allow_unsupported_ref=ns.allow_unsupported_ref,
        lock_wait=getattr(ns, "wait", 0.0),
        offline=ns.offline,
        site=site_options(site),
        locked=getattr(ns, "locked", False),
        frozen=getattr(ns, "frozen", False),
        lockfile=lockfile,
    )


def cmd_plan(ns: argparse.Namespace) -> int:
    """`plan`: print the graph, run nothing."""
    if getattr(ns, "bundle", None) is not None:
        raise InputError("plan reads no bundle", hint="use `install --bundle PATH --dry-run`")
    from installer.install import prepare_plan  # noqa: PLC0415
    from installer.planview import plan_json, plan_text  # noqa: PLC0415
    from installer.siteconfig.apply import applied_environment  # noqa: PLC0415

    options = run_options(ns)
    with applied_environment(dict(options.site.environment)):
        plan = prepare_plan(options)
    if ns.json:
        emit_json(plan_json(plan))
    else:
        out(plan_text(plan))
    return EXIT_OK


def cmd_install(ns: argparse.Namespace) -> int:
    """The main job."""
    if getattr(ns, "bundle", None) is not None:  # from an offline bundle: checked, then unpacked
        from installer.cli_bundle import cmd_install_bundle  # noqa: PLC0415

        return cmd_install_bundle(ns)
    return install_with(ns, run_options(ns))


def install_with(ns: argparse.Namespace, options: RunOptions) -> int:
    """Plan, then run (or show, with --dry-run) the install `options` describe."""
    from installer.install import prepare_plan, run_install  # noqa: PLC0415
    from installer.planview import plan_json, plan_text, report_json, summary_text  # noqa: PLC0415
    from installer.render import Console  # noqa: PLC0415
    from installer.siteconfig.apply import applied_environment  # noqa: PLC0415

    with applied_environment(dict(options.site.environment)):
        plan = prepare_plan(options)
        if ns.dry_run:
            emit_json(plan_json(plan)) if ns.json else out(plan_text(plan))
            return EXIT_OK
        for note in plan.notes:
            err(f"note: {note}")
        with listening(Console(quiet=ns.json)):
            result = run_install(plan, force=frozenset(ns.force), preflight=not ns.no_preflight)
    if ns.json:
        emit_json(report_json(result))
    else:
        err(summary_text(result))
    return EXIT_OK if result.report.ok else EXIT_STEP_FAILED


def cmd_verify(ns: argparse.Namespace) -> int:
    """`verify --prefix P`: the verification checks on any env."""
    from installer.verifycmd import verify_prefix  # noqa: PLC0415

    if getattr(ns, "against", None) is not None:  # `--against LOCKFILE`: the drift report
        from installer.cli_lock import cmd_verify_against  # noqa: PLC0415

        return cmd_verify_against(ns)

    report = verify_prefix(ns.prefix, profile=ns.profile, require_gpu=ns.require_gpu)
    if ns.json:
        emit_json({"schema": "verl-bootstrap.verify/1", **report.to_json()})
    else:
        for check in report.checks:
            out(f"{_mark(check.status)} {check.name}: {check.detail}")
        out("verified" if report.ok else "verification FAILED")
    return EXIT_OK if report.ok else EXIT_STEP_FAILED


def _mark(status: str) -> str:
    return {"ok": "✓", "fail": "✗", "skipped": "·", "warn": "!"}.get(status, "?")


def cmd_profiles_list(ns: argparse.Namespace) -> int:
    """`profiles list`."""
    from installer.profile import list_profiles, load_profile  # noqa: PLC0415

    names = list_profiles()
    width = max((len(n) for n in names), default=0)
    for name in names:
        profile = load_profile(name)
        variants = ",".join(profile.cuda_variants)
        out(f"{name:{width}} {variants:14} {profile.description}")
    return EXIT_OK


def cmd_profiles_show(ns: argparse.Namespace) -> int:
    """`profiles show NAME [--verl-ref REF]`: the profile with inheritance and stack applied."""
    from installer.profile import load_profile  # noqa: PLC0415
    from installer.profile.stacks import apply_stack, stack_for, supported_refs  # noqa: PLC0415

    base = load_profile(ns.name)
    profile = apply_stack(base, ns.verl_ref)
    body: dict[str, Any] = profile.model_dump(mode="json", exclude={"stacks", "extends"})
    if ns.json:
        emit_json(body)
    else:
        import yaml  # noqa: PLC0415

        stack = stack_for(base, profile.verl.ref)
        if stack is not None and stack.note:
            out(f"# verl {profile.verl.ref}: {stack.note}")
        out(f"# verl refs with a stack: {', '.join(supported_refs(base))}")
        out(yaml.safe_dump(body, sort_keys=False, width=100).rstrip())
    return EXIT_OK


def cmd_profiles_validate(ns: argparse.Namespace) -> int:
    """`profiles validate FILE`."""
    from installer.profile import load_profile  # noqa: PLC0415

    if not ns.file.is_file():
        raise InputError(f"{ns.file} does not exist")
    # `extends` looks beside the file first, then among the shipped profiles (as install does)
    profile = load_profile(str(ns.file))
    out(f"{ns.file}: valid profile {profile.name!r} ({len(profile.stages)} stages)")
    return EXIT_OK
