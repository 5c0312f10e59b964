"""The `doctor` subcommand: named checks of the machine (and an env), before and after installs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import (
    cuda_flag,
    json_flag,
    name_flag,
    prefix_flag,
    profile_flag,
    renamed,
    skip_check_flag,
    verl_ref_flag,
)
from verl_bootstrap.cli.optionsbuilder import ACTIVE_ENV, chosen_env, recorded_profile, run_options
from verl_bootstrap.cli.output import emit_json, mark, out, path_arg
from verl_bootstrap.errors import Refused

if TYPE_CHECKING:
    from verl_bootstrap.plan.doctor import DoctorInputs, DoctorReport
    from verl_bootstrap.plan.graph import Plan

__all__ = ["cmd_doctor", "doctor_inputs", "flags_doctor"]


def flags_doctor(p: argparse.ArgumentParser) -> None:
    """doctor's flags."""
    profile_flag(
        p, "judge the machine against this profile's plan (default: the --prefix env's own)"
    )
    p.add_argument(
        "env", nargs="?", metavar="ENV", help="an env to check: its name (`envs list`) or folder"
    )
    where = p.add_mutually_exclusive_group()
    name_flag(where, "an env to check, by its name (as `envs list` shows it)")
    prefix_flag(where, "an env to check (default: the activated one, $VERL_BOOTSTRAP_PREFIX)")
    where.add_argument(
        "--env-python",
        type=path_arg,
        metavar="PATH",
        help="an env's interpreter, to check that env",
    )
    renamed(p, "--python", "--env-python", "--python is the base interpreter of install")
    cuda_flag(p, "auto | cpu | cuXYZ (default: the env's own, else auto)")
    verl_ref_flag(p, "the verl ref the env is for")
    skip_check_flag(p, "leave out one check by name (repeatable)")
    json_flag(p)


def cmd_doctor(ns: argparse.Namespace) -> int:
    """Run every check and print the verdict; exit 3 when one fails."""
    from verl_bootstrap.plan.doctor import run_doctor
    from verl_bootstrap.siteconfig import load_site, site_options
    from verl_bootstrap.siteconfig.apply import applied_environment

    # the site's CA bundle, proxy and mirrors, as a run has them: a fix doctor names must work
    with applied_environment(dict(site_options(load_site()).environment)):
        report = run_doctor(doctor_inputs(ns))
    if ns.json:
        emit_json(report.to_dict())
    else:
        out(render(report))
    return int(report.exit_code)


def doctor_inputs(ns: argparse.Namespace) -> DoctorInputs:
    """Doctor's inputs: from the profile's plan when one is named, else the machine (and env)."""
    from verl_bootstrap.plan.doctor import DoctorInputs, inputs_from_plan
    from verl_bootstrap.plan.doctor.checklist import known_checks

    known_checks(ns.skip_check)
    skip = frozenset(ns.skip_check)
    if ns.env is not None or ns.name is not None:
        ns.prefix = chosen_env(ns, command="doctor")
        ns.name = None  # named once: the options builder takes the prefix
    if ns.prefix is None and ns.env_python is None and os.environ.get(ACTIVE_ENV):
        ns.prefix = Path(os.environ[ACTIVE_ENV])  # inside an activated env: that env
    if ns.prefix is not None and not ns.profile:
        ns.profile = recorded_profile(ns.prefix.absolute())  # the env's own profile
    ns.python = ns.env_python  # run_options reads --python as a base interpreter: not here
    if not ns.profile:
        return DoctorInputs(prefix=ns.prefix, python=ns.python, skip=skip)
    try:
        plan = _plan(ns)
    except Refused:
        # No variant this host can run (no driver, or too old): check the profile anyway, so the
        # driver checks say why and what to do.
        from verl_bootstrap.profile import load_profile

        profile = load_profile(ns.profile)
        return DoctorInputs(profile=profile, prefix=ns.prefix, python=ns.python, skip=skip)
    inputs = inputs_from_plan(plan)
    from dataclasses import replace

    return replace(
        inputs, prefix=ns.prefix or inputs.prefix, python=ns.python, skip=skip | inputs.skip
    )


def _plan(ns: argparse.Namespace) -> Plan:
    from verl_bootstrap.run.installrun import prepare_plan

    return prepare_plan(run_options(ns, python=None))  # --python names an env here, not a base


def render(report: DoctorReport) -> str:
    """One line per check; a fix under each warning and failure; the verdict last."""
    lines = []
    for check in report.checks:
        lines.append(f"{mark(check.status.value)} {check.name:20} {check.finding}")
        if check.fix:
            lines.append(f"  {'':20} fix: {check.fix}")
    verdict = "doctor: problems found (exit 3)" if report.failed else "doctor: nothing fails"
    return "\n".join([*lines, "", verdict])
