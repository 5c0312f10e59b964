"""One adapter per subcommand: build options, call one library function, render the result."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap.cli.options import options_and_state, run_options
from verl_bootstrap.cli.output import emit_json, err, mark, out, paint
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, InputError
from verl_bootstrap.events import listening
from verl_bootstrap.options import RunOptions
from verl_bootstrap.paths import logs_dir, state_file

if TYPE_CHECKING:
    from verl_bootstrap.bundle.install import OpenedBundle
    from verl_bootstrap.cli.planview import EnvFacts
    from verl_bootstrap.lifecycle.state import State
    from verl_bootstrap.run.install import InstallResult
    from verl_bootstrap.verify.train import TrainReport

__all__ = [
    "cmd_install",
    "cmd_plan",
    "cmd_profiles_list",
    "cmd_profiles_show",
    "cmd_profiles_validate",
    "cmd_verify",
    "env_facts",
    "install_with",
]


def cmd_plan(ns: argparse.Namespace) -> int:
    """`plan`: print the graph, run nothing (a --bundle is unpacked into a scratch folder that is
    removed once the plan is shown: the tool's cache is left as it was)."""
    import tempfile

    from verl_bootstrap.cli.planview import plan_json, plan_text
    from verl_bootstrap.plan.choices import Bundle
    from verl_bootstrap.run.install import prepare_plan
    from verl_bootstrap.siteconfig.apply import applied_environment

    options = run_options(ns)
    with (
        applied_environment(dict(options.site.environment)),
        tempfile.TemporaryDirectory(prefix="verl-plan-bundle-") as scratch,
    ):
        bundle = None if ns.bundle is None else Bundle(ns.bundle, into=Path(scratch))
        plan = prepare_plan(options, bundle=bundle)
        if plan.opened is not None:
            err(opened_line(plan.opened, kept=False))
        if ns.json:
            emit_json(plan_json(plan))
        else:
            out(plan_text(plan))
    return EXIT_OK


def cmd_install(ns: argparse.Namespace) -> int:
    """The main job."""
    options, state = options_and_state(ns)  # a --bundle is opened by the plan, not here
    return install_with(ns, options, state)


def install_with(ns: argparse.Namespace, options: RunOptions, state: State | None = None) -> int:
    """Plan, then run (or show, with --dry-run) the install `options` describe; `state`: the
    env's state as read for the options (read once, passed on)."""
    from verl_bootstrap.cli.planview import plan_json, plan_text, report_json, summary_text
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.plan.choices import Bundle
    from verl_bootstrap.run.install import prepare_plan, run_install
    from verl_bootstrap.siteconfig.apply import applied_environment

    archive = vars(ns).get("bundle")  # from an offline bundle: checked, then unpacked
    with applied_environment(dict(options.site.environment)):
        plan = prepare_plan(options, bundle=None if archive is None else Bundle(archive))
        if plan.opened is not None:
            err(opened_line(plan.opened, kept=True))
        if ns.dry_run:
            emit_json(plan_json(plan)) if ns.json else out(plan_text(plan))
            return EXIT_OK
        err(plan.route)  # the run's first line: the lockfile it installs, or why it resolves
        from verl_bootstrap.cli.envs import confirm_changes

        if state is not None and state.path != state_file(plan.prefix):
            state = None  # not this env's (a bundle's options name their own prefix)
        confirm_changes(plan, state, yes=ns.yes)
        started = time.monotonic()
        with Console(quiet=ns.json) as console, listening(console):
            result = run_install(
                plan, state=state, force=frozenset(ns.force), preflight=not ns.no_preflight
            )
    if ns.json:
        emit_json(
            {**report_json(result), "notes": console.notes, "build_progress": console.progress}
        )
    else:
        facts = env_facts(result, time.monotonic() - started)
        err(summary_text(result, facts, paint=paint))
    return EXIT_OK if result.ok else EXIT_STEP_FAILED


def opened_line(opened: OpenedBundle, *, kept: bool) -> str:
    """What checking and unpacking a bundle did (`kept`: in the tool's cache, for reuse)."""
    members = len(opened.unpacked.manifest.members)
    where = opened.unpacked.root if kept else "a scratch folder, removed after the plan"
    return (
        f"note: {opened.archive} checked and unpacked into {where} in {opened.seconds:.1f} s "
        f"({members} members, every sha256 matches its manifest)"
    )


def env_facts(result: InstallResult, seconds: float) -> EnvFacts:
    """The totals the summary shows: time, packages, size, the lockfile written or installed."""
    from verl_bootstrap.cli.planview import EnvFacts
    from verl_bootstrap.lifecycle.inspect import disk_usage, package_count
    from verl_bootstrap.paths import env_lockfile

    prefix = result.plan.prefix
    wrote = any(o.id == "record-lock" and o.status.value == "done" for o in result.report.outcomes)
    locked = result.plan.locked
    return EnvFacts(
        seconds=seconds,
        packages=package_count(prefix),
        # walking every file takes a while; a run that changed nothing leaves the size as it was
        size=disk_usage(prefix) if _changed(result) else None,
        lockfile_written=env_lockfile(prefix) if wrote else None,
        lockfile_used=locked.path if locked is not None else None,
    )


def _changed(result: InstallResult) -> bool:
    return any(o.status.value != "skipped" for o in result.report.outcomes)


def cmd_verify(ns: argparse.Namespace) -> int:
    """`verify --prefix P`: the verification checks on any env."""
    from verl_bootstrap.cli.options import chosen_env
    from verl_bootstrap.lifecycle.reverify import verify_prefix

    prefix = ns.prefix = chosen_env(ns, command="verify")  # the activated env by default
    if getattr(ns, "against", None) is not None:  # `--against LOCKFILE`: the drift report
        from verl_bootstrap.cli.lock import cmd_verify_against

        return cmd_verify_against(ns)

    from verl_bootstrap.cli.render import Console

    with Console(quiet=ns.json) as console, console.activity("verify", "importing the stack"):
        report = verify_prefix(prefix, profile=ns.profile, require_gpu=ns.require_gpu)
    trained = _train_level(prefix, ns) if ns.train and report.ok else None
    if ns.json:
        body = {"schema": "verl-bootstrap.verify/1", **report.to_json()}
        if ns.train:
            body["train"] = trained.to_json() if trained else None
        emit_json(body)
    else:
        for check in report.checks:
            out(f"{mark(check.status)} {check.name}: {check.detail}")
        out("verified" if report.ok else "verification FAILED")
        if trained is not None:
            _show_train(trained)
        elif ns.train:
            out(f"training step ({ns.train}) not run: the env failed the checks above")
    ok = report.ok and (trained.ok if ns.train and trained else not ns.train)
    return EXIT_OK if ok else EXIT_STEP_FAILED


def _train_level(prefix: Path, ns: argparse.Namespace) -> TrainReport:
    """`verify --train LEVEL`: one real training step, its checks recorded in the env."""
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.lifecycle.runlog import record_train
    from verl_bootstrap.verify.train import record_entry, train_step

    what = "one SFT step" if ns.train == "sft" else "one GRPO step (rollout, reward, update)"
    with Console(quiet=ns.json) as console, console.activity("train", what):
        scratch = ns.train_dir
        log = (scratch or logs_dir(prefix)) / f"train-{ns.train}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")  # this run's alone
        trained = train_step(prefix, ns.train, log_path=log, scratch=scratch)
    record_train(prefix, trained.level, record_entry(trained))
    return trained


def _show_train(trained: TrainReport) -> None:
    out(f"training step: {trained.level} ({trained.route}), {trained.seconds:.0f} s")
    for check in trained.checks:
        out(f"{mark(check.status)} {check.name}: {check.detail}")
    out(f"trained ({trained.level})" if trained.ok else f"training step FAILED ({trained.level})")


def cmd_profiles_list(ns: argparse.Namespace) -> int:
    """`profiles list`."""
    from verl_bootstrap.profile import list_profiles, load_profile

    profiles = [load_profile(name) for name in list_profiles()]
    if ns.json:
        rows = [
            {"name": p.name, "cuda_variants": list(p.cuda_variants), "description": p.description}
            for p in profiles
        ]
        emit_json({"schema": "verl-bootstrap.profiles/1", "profiles": rows})
        return EXIT_OK
    width = max((len(p.name) for p in profiles), default=0)
    out(f"{'PROFILE':{width}} {'CUDA VARIANTS':14} DESCRIPTION")
    for profile in profiles:
        variants = ",".join(profile.cuda_variants)
        out(f"{profile.name:{width}} {variants:14} {profile.description}")
    return EXIT_OK


def cmd_profiles_show(ns: argparse.Namespace) -> int:
    """`profiles show NAME [--verl-ref REF]`: the profile with inheritance and stack applied."""
    from verl_bootstrap.profile import load_profile
    from verl_bootstrap.profile.stacks import apply_stack, stack_for, supported_refs

    base = load_profile(ns.name)
    options = frozenset(s.option for s in base.stages if s.option)  # optional stages shown too
    profile = apply_stack(base, ns.verl_ref, options=options)
    body: dict[str, Any] = profile.model_dump(mode="json", exclude={"stacks", "extends"})
    if ns.json:
        emit_json(body)
    else:
        import yaml

        # for a person: what is set (the JSON keeps every field, null and empty ones too)
        body = profile.model_dump(mode="json", exclude={"stacks", "extends"}, exclude_none=True)
        stack = stack_for(base, profile.verl.ref)
        if stack is not None and stack.note:
            out(f"# verl {profile.verl.ref}: {stack.note}")
        out(f"# verl refs with a stack: {', '.join(supported_refs(base))}")
        out(yaml.safe_dump(body, sort_keys=False, width=100).rstrip())
    return EXIT_OK


def cmd_profiles_validate(ns: argparse.Namespace) -> int:
    """`profiles validate FILE`."""
    from verl_bootstrap.profile import load_profile

    if not ns.file.is_file():
        why = "is not a regular file" if ns.file.exists() else "does not exist"
        raise InputError(f"{ns.file} {why}", hint="name the profile's YAML file")
    # `extends` looks beside the file first, then among the shipped profiles (as install does)
    profile = load_profile(str(ns.file))
    always = [s.id for s in profile.stages if not s.option]
    optional = [f"{s.id} (--with-{s.option})" for s in profile.stages if s.option]
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.profile-validate/1",
                "file": str(ns.file),
                "profile": profile.name,
                "stages": always,
                "optional_stages": optional,
            }
        )
        return EXIT_OK
    extra = f", plus optional {', '.join(optional)}" if optional else ""
    out(f"{ns.file}: valid profile {profile.name!r}: stages {', '.join(always)}{extra}")
    return EXIT_OK
