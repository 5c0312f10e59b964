"""Subcommands of the site feature: `config show`, `onboard`, `activate` (their flags and
handlers; cli.registry names them). The site config sits under every command-line flag
(run_options merges it)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from verl_bootstrap.cli.flags import config_flag, dry_run_flag, env_flag, json_flag
from verl_bootstrap.cli.options import run_options
from verl_bootstrap.cli.output import emit_json, err, out, paint, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, InputError
from verl_bootstrap.events import listening
from verl_bootstrap.paths import atomic_write, default_prefix

__all__ = [
    "cmd_activate",
    "cmd_config_show",
    "cmd_onboard",
    "flags_activate",
    "flags_config_show",
    "flags_onboard",
]
_PASSED_TO_INSTALL = ("verl_source", "verl_ref", "cuda", "python", "backend")


def flags_config_show(show: argparse.ArgumentParser) -> None:
    """config show."""
    config_flag(show)
    json_flag(show)


def flags_onboard(p: argparse.ArgumentParser) -> None:
    """onboard's flags."""
    p.add_argument("--config", required=True, metavar="FILE_OR_URL", help="the lab's site config")
    p.add_argument("--profile", help="default: the lab config's defaults.profile")
    p.add_argument("--lockfile", help="default: the lab config's defaults.lockfile")
    p.add_argument("--prefix", type=path_arg, help="default: the lab's envs_dir/PROFILE")
    p.add_argument("--shell-init", action="store_true", help="also source it from your shell rc")
    p.add_argument(
        "--shell",
        action="append",
        choices=["bash", "zsh", "fish"],
        default=[],
        help="the shell whose rc --shell-init writes (repeatable; default: $SHELL)",
    )
    p.add_argument(
        "--skip-check",
        action="append",
        default=[],
        metavar="NAME",
        help="override one preflight check (recorded in the lockfile)",
    )
    for flag in ("--verl-source", "--verl-ref", "--cuda", "--backend"):
        p.add_argument(flag, help=argparse.SUPPRESS)
    p.add_argument("--python", type=path_arg, help=argparse.SUPPRESS)
    p.add_argument(
        "--emit-script",
        nargs="?",
        const="-",
        metavar="FILE",
        help="write the lab's onboarding shell script (to FILE, or stdout) instead",
    )
    p.add_argument("--publish-config", metavar="URL", help="config location the script names")
    p.add_argument("--tool", metavar="REQUIREMENT", help="what the script pip-installs")
    dry_run_flag(p, "show the env it would build (its plan) and the files it would write")
    json_flag(p)


def flags_activate(p: argparse.ArgumentParser) -> None:
    """activate's flags."""
    env_flag(p)
    p.add_argument("--shell", choices=["bash", "zsh", "fish"], help="default: your $SHELL")


def cmd_config_show(ns: argparse.Namespace) -> int:
    """`config show`: every effective setting and its source, secrets redacted."""
    from verl_bootstrap.host.indexes import read_pip_settings
    from verl_bootstrap.siteconfig import load_site, site_options
    from verl_bootstrap.siteconfig.apply import apply_site_indexes
    from verl_bootstrap.siteconfig.show import show_json, show_text

    site = load_site(ns.config)
    options = site_options(site, write=False)
    pip = apply_site_indexes(read_pip_settings(), options)
    body = show_json(site, environment=dict(options.environment), environ=os.environ, pip=pip)
    body["notes"] = _storage_notes(site.config.defaults.envs_dir, dict(options.environment))
    emit_json(body) if ns.json else out(show_text(body))
    return EXIT_OK


def _storage_notes(envs_dir: str | None, site_env: dict[str, str | None]) -> list[str]:
    """Where envs and caches would go, and whether that is a network filesystem."""
    from verl_bootstrap.host.filesystems import storage_notes

    environ = {k: v for k, v in {**os.environ, **site_env}.items() if v is not None}
    envs = Path(envs_dir) if envs_dir else default_prefix("x").parent
    return storage_notes(envs, environ)


def cmd_activate(ns: argparse.Namespace) -> int:
    """`activate NAME` (or --prefix P): the shell code that enters the env."""
    from verl_bootstrap.cli.options import chosen_env
    from verl_bootstrap.envs.activation import activation_script
    from verl_bootstrap.envs.base import env_python
    from verl_bootstrap.onboard import default_shell

    prefix = chosen_env(ns, command="activate")
    if not env_python(prefix).exists():
        raise InputError(f"{prefix} is not an env (no {env_python(prefix)})")
    out(activation_script(prefix, ns.shell or default_shell(os.environ)).rstrip("\n"))
    return EXIT_OK


def cmd_onboard(ns: argparse.Namespace) -> int:
    """`onboard --config LAB`: the lab's env, locked, activated, checked by doctor."""
    from verl_bootstrap.onboard import (
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
    from verl_bootstrap.onboard import rc_file
    from verl_bootstrap.paths import tool_home
    from verl_bootstrap.run.install import prepare_plan

    plan = prepare_plan(options)
    home = tool_home(os.environ)
    files = [home / "activate", home / "activate.fish"]
    user = Path(os.environ.get("HOME") or Path.home())
    rcs = [rc_file(shell, os.environ, user) for shell in shells] if ns.shell_init else []
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
    from verl_bootstrap.cli import build_parser

    parser = build_parser("install")
    argv = ["install", "--profile", profile, "--config", ns.config]
    if ns.prefix:
        argv += ["--prefix", str(ns.prefix)]
    for name in _PASSED_TO_INSTALL:
        if getattr(ns, name, None):
            argv += [f"--{name.replace('_', '-')}", str(getattr(ns, name))]
    for check in ns.skip_check:
        argv += ["--skip-check", check]
    if lockfile is not None:
        if _install_accepts(parser, "--locked"):
            argv += ["--locked", "--lockfile", str(lockfile)]
        else:
            err(f"note: this verl-bootstrap cannot install --locked yet; {lockfile} is not used")
    return run_options(parser.parse_args(argv))


def _install_accepts(parser: argparse.ArgumentParser, flag: str) -> bool:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            install = action.choices["install"]
            return any(flag in a.option_strings for a in install._actions)
    return False


def _run_onboard(
    ns: argparse.Namespace, options: Any, shells: tuple[str, ...], lockfile: Path | None
) -> int:
    from verl_bootstrap.cli.planview import report_json, summary_text
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.onboard import describe, onboard

    started = time.monotonic()
    with Console(quiet=ns.json) as console, listening(console):
        result = onboard(options, shells=shells, shell_init=ns.shell_init, lockfile=lockfile)
    if ns.json:
        body = {"schema": "verl-bootstrap.onboard/1", **describe(result)}
        emit_json({**body, "install": report_json(result.install)})
    else:
        from verl_bootstrap.cli.install import env_facts

        facts = env_facts(result.install, time.monotonic() - started)
        err(summary_text(result.install, facts, paint=paint))
        _print_onboard(result)
    if not result.install.ok:
        return EXIT_STEP_FAILED
    return EXIT_OK if result.ok else int(result.doctor.exit_code if result.doctor else 1)


def _print_onboard(result: Any) -> None:
    if not result.install.ok:
        return
    from verl_bootstrap.envs.activation import activation_line

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
    from verl_bootstrap.onboard import onboarding_script
    from verl_bootstrap.siteconfig import load_site

    site = load_site(ns.config)
    location = ns.publish_config or _absolute(ns.config)
    script = onboarding_script(site, config=location, tool=ns.tool)
    if ns.emit_script == "-":
        out(script.rstrip("\n"))
    elif ns.dry_run:
        out(f"would write {ns.emit_script} ({len(script.splitlines())} lines, executable)")
    else:
        target = Path(ns.emit_script)
        atomic_write(target, script)
        target.chmod(0o755)
        err(f"wrote {target}: publish it; new members run `sh {target.name}`")
    return EXIT_OK


def _absolute(location: str) -> str:
    return location if "://" in location else str(Path(location).expanduser().absolute())
