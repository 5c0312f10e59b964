"""`verify`: an env's checks (imports, versions, pip check, the GPU smoke test), one real training
step with --train, or every difference from a lockfile with --against."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from verl_bootstrap.cli.flags import env_flag, json_flag, profile_flag, train_flag
from verl_bootstrap.cli.output import emit_json, mark, out, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, InputError

if TYPE_CHECKING:
    from verl_bootstrap.verify.train import TrainReport

__all__ = ["cmd_verify", "flags_verify"]

# `verify --against` with no path: the lockfile the env was installed from (its record names it)
AGAINST_ITS_OWN = Path("<the lockfile the env came from>")


def flags_verify(p: argparse.ArgumentParser) -> None:
    """verify: which env, which checks."""
    env_flag(p)
    profile_flag(p, "profile whose checks to run (default: the env's own)")
    p.add_argument("--require-gpu", action="store_true", help="fail when no GPU smoke test can run")
    p.add_argument(
        "--against",
        type=path_arg,
        nargs="?",
        const=AGAINST_ITS_OWN,
        metavar="LOCKFILE",
        help="list every difference between the env and this lockfile (non-zero on any); "
        "alone: the lockfile the env was installed from",
    )
    train_flag(
        p,
        "also run one real verl training step, offline, on a tiny model made locally: "
        "sft (seconds) or rl (one GRPO step with a rollout; about a minute on a CPU)",
    )
    p.add_argument(
        "--train-dir",
        type=path_arg,
        metavar="DIR",
        help="the training step's scratch folder: inputs, checkpoints, log (default: the env's "
        ".verl-bootstrap/train/; cluster verify --train gives each node a private one)",
    )
    json_flag(p)


def cmd_verify(ns: argparse.Namespace) -> int:
    """`verify --prefix P`: the verification checks on any env."""
    from verl_bootstrap.cli.optionsbuilder import chosen_env
    from verl_bootstrap.run.state.reverify import verify_prefix
    from verl_bootstrap.verify.trainscratch import train_folder

    prefix = ns.prefix = chosen_env(ns, command="verify")  # the activated env by default
    if ns.train:  # its scratch folder a folder, made private (or refused) before the checks
        if ns.train_dir is not None:
            _check_train_dir(ns.train_dir)
        train_folder(prefix, ns.train_dir)
    if getattr(ns, "against", None) is not None:  # `--against LOCKFILE`: the drift report
        return _verify_against(ns)

    from verl_bootstrap.cli.render import Console

    with Console(quiet=ns.json) as console, console.activity("verify", "importing the stack"):
        report = verify_prefix(prefix, profile=ns.profile, require_gpu=ns.require_gpu)
    trained = _train_level(prefix, ns) if ns.train and report.ok else None
    after = () if report.ok else _after_failure(prefix)
    if ns.json:
        body = {"schema": "verl-bootstrap.verify/1", **report.to_json()}
        if ns.train:
            body["train"] = trained.to_json() if trained else None
        emit_json({**body, "next": list(after)} if after else body)
    else:
        for check in report.checks:
            out(f"{mark(check.status)} {check.name}: {check.detail}")
        out("verified" if report.ok else "verification FAILED")
        for line in after:
            out(line)
        if trained is not None:
            _show_train(trained)
        elif ns.train:
            out(f"training step ({ns.train}) not run: the env failed the checks above")
    ok = report.ok and (trained.ok if ns.train and trained else not ns.train)
    return EXIT_OK if ok else EXIT_STEP_FAILED


def _check_train_dir(folder: Path) -> None:
    """--train-dir names a folder, or one to make inside a folder: not a file (`/etc/passwd`),
    nor a path through one."""
    there = next((p for p in (folder, *folder.absolute().parents) if p.exists()), None)
    if there is not None and not there.is_dir():
        where = f"{there} is" if there != folder else "it is"
        raise InputError(
            f"--train-dir {folder}: {where} not a folder",
            hint="name a folder for the step's scratch (made if it is not there), or leave "
            "--train-dir out for the env's own",
        )


def _after_failure(prefix: Path) -> tuple[str, ...]:
    """The way out of a failed verification: the env checked against its record (what a re-run
    would repair), then the command to run."""
    from verl_bootstrap.run.repair import record_drift
    from verl_bootstrap.run.state.hints import next_step

    return next_step(prefix, record_drift(prefix))


def _train_level(prefix: Path, ns: argparse.Namespace) -> TrainReport:
    """`verify --train LEVEL`: one real training step, its checks recorded in the env."""
    from verl_bootstrap.cli.render import Console
    from verl_bootstrap.run.state.reverify import train_prefix

    what = "one SFT step" if ns.train == "sft" else "one GRPO step (rollout, reward, update)"
    with Console(quiet=ns.json) as console, console.activity("train", what):
        return train_prefix(prefix, ns.train, scratch=ns.train_dir)


def _show_train(trained: TrainReport) -> None:
    out(f"training step: {trained.level} ({trained.route}), {trained.seconds:.0f} s")
    for check in trained.checks:
        out(f"{mark(check.status)} {check.name}: {check.detail}")
    out(f"trained ({trained.level})" if trained.ok else f"training step FAILED ({trained.level})")


def _verify_against(ns: argparse.Namespace) -> int:
    """`verify --prefix P --against LOCKFILE`: every difference; non-zero on any."""
    from verl_bootstrap.run.state.reverify import verify_against

    given = None if ns.against == AGAINST_ITS_OWN else ns.against
    ns.against, compared = verify_against(ns.prefix, given)
    found, unknown, held = compared.differences, not compared.hashes_checked, compared.held
    after = _repairable(ns.prefix) if found else ()
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.verify-against/1",
                "ok": not found,
                "lockfile": str(ns.against),
                "hashes_checked": not unknown,
                "differences": [d.__dict__ for d in found],
                "held_by_whole_wheels": held,
                "next": list(after),
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
        for line in after:
            out(line)
    return EXIT_STEP_FAILED if found else EXIT_OK


def _repairable(prefix: Path) -> tuple[str, ...]:
    """What a re-run would put back of the differences (the env against its own record), and the
    command; nothing when the differences are not drift (another lockfile's pins, say)."""
    from verl_bootstrap.run.repair import record_drift
    from verl_bootstrap.run.state.hints import next_step

    drift = record_drift(prefix)
    return next_step(prefix, drift) if drift else ()
