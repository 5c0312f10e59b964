"""`onboard --config LAB`: a new lab member's env from the lab's site config, in one go (locked,
activated, checked by doctor), or the lab's onboarding script with --emit-script."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from verl_bootstrap.cli.flags import (
    config_flag,
    cuda_flag,
    dry_run_flag,
    json_flag,
    lockfile_flag,
    prefix_flag,
    profile_flag,
    shell_flag,
    skip_check_flag,
    verl_ref_flag,
)
from verl_bootstrap.cli.optionsbuilder import run_options
from verl_bootstrap.cli.output import emit_json, err, out, paint, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, InputError
from verl_bootstrap.events import listening

__all__ = ["cmd_onboard", "flags_onboard"]
_PASSED_TO_INSTALL = ("verl_source", "verl_ref", "cuda", "python", "backend")


def flags_onboard(p: argparse.ArgumentParser) -> None:
    """onboard's flags."""
    config_flag(p, "the lab's site config", required=True)
    profile_flag(p, "default: the lab config's defaults.profile")
    lockfile_flag(p, "default: the lab config's defaults.lockfile", url=True)
    prefix_flag(p, "default: the lab's envs_dir/PROFILE")
    p.add_argument("--shell-init", action="store_true", help="also source it from your shell rc")
    shell_flag(
        p, "the shell whose rc --shell-init writes (repeatable; default: $SHELL)", repeat=True
    )
    skip_check_flag(p, "override one preflight check (recorded in the lockfile)")
    # install's, passed on to it as they are (not shown in onboard's help)
    p.add_argument("--verl-source", help=argparse.SUPPRESS)
    verl_ref_flag(p, argparse.SUPPRESS)
    cuda_flag(p, argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    p.add_argument("--python", type=path_arg, help=argparse.SUPPRESS)
    p.add_argument(
        "--emit-script",
        nargs="?",
        const="-",
        metavar="FILE",
        help="write the lab's onboarding shell script instead: to FILE, with the tool's own "
        "wheel beside it (what the script installs); to stdout with --tool",
    )
    p.add_argument("--publish-config", metavar="URL", help="config location the script names")
    p.add_argument(
        "--tool",
        metavar="REQUIREMENT",
        help="the script installs this requirement from the lab's index (default: this tool's "
        "own wheel, written beside the script)",
    )
    dry_run_flag(
        p, "show the env it would build (its plan) and the files it would write; change nothing"
    )
    json_flag(p)


def cmd_onboard(ns: argparse.Namespace) -> int:
    """`onboard --config LAB`: the lab's env, locked, activated, checked by doctor."""
    from verl_bootstrap.lab.onboard import (
        default_shell,
        fetch_file,
        lab_defaults,
        local_profile,
    )
    from verl_bootstrap.siteconfig import load_site, site_options
    from verl_bootstrap.siteconfig.apply import applied_environment

    if ns.emit_script is not None:
        return _emit_script(ns)
    site = load_site(ns.config)
    profile, lock_location = lab_defaults(site, ns.profile, ns.lockfile)
    with applied_environment(dict(site_options(site, write=not ns.dry_run).environment)):
        lockfile = fetch_file(lock_location, os.environ, "lockfile") if lock_location else None
        options = _install_options(ns, local_profile(profile, os.environ), lockfile)
        shells = tuple(ns.shell) or (default_shell(os.environ),)
        if ns.dry_run:
            return _onboard_dry_run(ns, options, shells)
        return _run_onboard(ns, options, shells, lockfile)


def _onboard_dry_run(ns: argparse.Namespace, options: Any, shells: tuple[str, ...]) -> int:
    """`onboard --dry-run`: the install's plan, the activation files and the shell rc files it
    would write; nothing is installed or written (a lab lockfile given by URL is fetched into
    the cache to plan with, as `install --lockfile URL` does)."""
    from verl_bootstrap.cli.planview import plan_json, plan_text
    from verl_bootstrap.lab.onboard.shellrc import planned_files
    from verl_bootstrap.run.installrun import prepare_plan

    plan = prepare_plan(options)
    files, rcs = planned_files(shells, shell_init=ns.shell_init, environ=os.environ)
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.onboard/1",
                "dry_run": True,
                "plan": plan_json(plan),
                "activation": [str(f) for f in files],
                "shell_init": [str(r) for r in rcs],
            }
        )
        return EXIT_OK
    out(plan_text(plan))
    out(f"would build {plan.prefix} (profile {plan.profile.name}), then run doctor on it")
    for file in files:
        out(f"would write {file}")
    for rc in rcs:
        out(f"would add the line that sources it to {rc}")
    return EXIT_OK


def _install_options(ns: argparse.Namespace, profile: str, lockfile: Path | None) -> Any:
    """The install's options, parsed by the real `install` parser so every default applies."""
    from verl_bootstrap.cli.argparser import Parser
    from verl_bootstrap.cli.commands.install import flags_install
    from verl_bootstrap.options import options_argv

    given = {name: getattr(ns, name) for name in _PASSED_TO_INSTALL if getattr(ns, name, None)}
    argv = options_argv(
        {
            **given,
            "profile": profile,
            "config": ns.config,
            "prefix": ns.prefix,
            "skip_checks": ns.skip_check,
            "locked": lockfile is not None,
            "lockfile": lockfile,
        }
    )
    parser = Parser(prog="verl-bootstrap install")
    flags_install(parser)
    return run_options(parser.parse_args(argv))


def _run_onboard(
    ns: argparse.Namespace, options: Any, shells: tuple[str, ...], lockfile: Path | None
) -> int:
    from verl_bootstrap.cli.planview import report_json, summary_text
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.lab.onboard import describe, onboard
    from verl_bootstrap.run.installrun import prepare_plan

    started = time.monotonic()
    plan = prepare_plan(options)
    if not ns.json:
        err(plan.route)  # the first line, as an install's: the lockfile it installs
    with Console(quiet=ns.json) as console, listening(console):
        result = onboard(plan, shells=shells, shell_init=ns.shell_init, lockfile=lockfile)
    if ns.json:
        body = {"schema": "verl-bootstrap.onboard/1", **describe(result)}
        emit_json({**body, "install": report_json(result.install)})
    else:
        from verl_bootstrap.run.summary import env_facts

        facts = env_facts(result.install, time.monotonic() - started)
        err(summary_text(result.install, facts, paint=paint))
        _print_onboard(result)
    if not result.install.ok:
        return EXIT_STEP_FAILED
    return EXIT_OK if result.ok else int(result.doctor.exit_code if result.doctor else 1)


def _print_onboard(result: Any) -> None:
    if not result.install.ok:
        return
    from verl_bootstrap.installer.envs.activation import activation_line

    prefix = result.install.plan.prefix
    out(f"env ready: {prefix} (profile {result.install.plan.profile.name})")
    out(f"enter it:  . {result.activation['bash']}    (fish: source {result.activation['fish']})")
    out(f"   or:     {activation_line(prefix)}")
    for rc in result.rc_files:
        out(f"your shell enters it at start-up: {rc}")
    if result.doctor is not None:
        for check in result.doctor.checks:
            if check.status.value in ("warn", "fail"):
                out(
                    f"doctor {check.status.value}: {check.name}: {check.finding} (fix: {check.fix})"
                )
        verdict = "ok" if result.doctor.ok else "FAILED"
        out(f"doctor: {verdict} ({len(result.doctor.checks)} checks)")


def _emit_script(ns: argparse.Namespace) -> int:
    """The lab's script, and (without --tool) the tool's own wheel beside it, which it installs."""
    from verl_bootstrap.lab.onboard.script import lab_script, write_script
    from verl_bootstrap.lab.onboard.toolwheel import planned_wheel, publish_wheel

    lab = lab_script(ns.config, publish_as=ns.publish_config)  # refused before any build
    if ns.emit_script == "-":
        if ns.tool is None:
            raise InputError(
                "the script installs the tool's wheel from its own folder, and stdout has none",
                hint="pass --emit-script FILE (the wheel is written beside it), or --tool "
                "REQUIREMENT when the lab's index serves verl-bootstrap",
            )
        out(lab.text(ns.tool).rstrip("\n"))
        return EXIT_OK
    target = Path(ns.emit_script)
    if ns.dry_run:
        lines = len(lab.text(ns.tool or "").splitlines())
        beside = "" if ns.tool else f", and the tool's wheel {planned_wheel()} beside it"
        out(f"would write {target} ({lines} lines, executable){beside}")
        return EXIT_OK
    tool = ns.tool or publish_wheel(target.absolute().parent)
    write_script(target, lab.text(tool))
    if ns.tool:
        err(f"wrote {target}: publish it; new members run `sh {target.name}`")
    else:
        wheel = target.parent / tool.name
        err(f"wrote {target} and {wheel} (the tool it installs, sha256 {tool.sha256[:12]}…):")
        err(f"keep them in one folder; new members run `sh {target.absolute()}`")
    return EXIT_OK
