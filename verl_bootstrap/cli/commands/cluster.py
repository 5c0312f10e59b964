"""Subcommands of the cluster feature: `cluster verify|install|script` (their flags and handlers;
cli.registry names them)."""

from __future__ import annotations

import argparse
import os
import shlex
from typing import Any

from verl_bootstrap.cli.flags import (
    config_flag,
    dry_run_flag,
    json_flag,
    lockfile_flag,
    prefix_flag,
    profile_flag,
    train_flag,
)
from verl_bootstrap.cli.output import emit_json, err, out, path_arg
from verl_bootstrap.errors import EXIT_OK, EXIT_STEP_FAILED, InputError
from verl_bootstrap.paths import atomic_write

__all__ = [
    "cmd_install",
    "cmd_script",
    "cmd_verify",
    "flags_install",
    "flags_script",
    "flags_verify",
]

_PROFILE_HELP = "whose checks to run (default: the env's own)"
_PREFIX_HELP = (
    "the env's prefix on the nodes; $VARIABLES in it are expanded on each node "
    "(quote it: '$LOCAL_SCRATCH/verl')"
)


def flags_verify(verify: argparse.ArgumentParser) -> None:
    """cluster verify."""
    _target_flags(verify)
    verify.add_argument("--fingerprint-only", action="store_true", help="skip the import checks")
    train_flag(
        verify, "also run `verify --train LEVEL` on every node: one real verl training step each"
    )
    verify.add_argument("--tool", help="verl-bootstrap's path on the nodes (default: this one's)")


def flags_install(install: argparse.ArgumentParser) -> None:
    """cluster install."""
    _target_flags(install)
    _install_flags(install)
    dry_run_flag(
        install, "say where it would install and the command each node would run; change nothing"
    )


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value}: one node or more")
    return number


def flags_script(script: argparse.ArgumentParser) -> None:
    """cluster script."""
    script.add_argument("--slurm", action="store_true", required=True, help="an sbatch script")
    script.add_argument(
        "--action", choices=["verify", "install"], default="verify", help="what each node runs"
    )
    script.add_argument("--nodes", type=_positive, required=True, help="how many nodes")
    script.add_argument("--time", default="01:00:00", help="the job's time limit (01:00:00)")
    script.add_argument("--partition", help="the Slurm partition (default: the cluster's)")
    prefix_flag(script, _PREFIX_HELP, on_nodes=True)
    profile_flag(script, _PROFILE_HELP)
    train_flag(
        script, "with --action verify: one real verl training step on every node (verify --train)"
    )
    _install_flags(script)
    script.add_argument("--output", "-o", type=path_arg, help="write here (default stdout)")


def _target_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray-address", metavar="ADDR", help="a running Ray cluster (host:port)")
    p.add_argument("--slurm", action="store_true", help="the current Slurm allocation (srun)")
    p.add_argument("--ray-python", type=path_arg, help="a Python with the cluster's Ray")
    prefix_flag(p, _PREFIX_HELP, on_nodes=True)
    profile_flag(p, _PROFILE_HELP)
    json_flag(p)
    slurm = p.add_argument_group("Slurm (with --slurm)")
    slurm.add_argument("--nodes", type=_positive, help="how many nodes (default: the allocation's)")
    slurm.add_argument("--time", help="the job steps' time limit, as srun reads it (e.g. 00:20:00)")
    slurm.add_argument("--partition", help="the partition the steps (or --submit's job) run in")
    slurm.add_argument(
        "--submit",
        action="store_true",
        help="outside an allocation: srun asks Slurm for --nodes nodes itself",
    )


def _install_flags(p: argparse.ArgumentParser) -> None:
    lockfile_flag(p, "install exactly this lockfile (--locked)", url=True)
    config_flag(p, "site config for the nodes' installs", metavar=None)
    p.add_argument("--tool", help="verl-bootstrap's path on the nodes (default: this one's)")


def _target(ns: argparse.Namespace) -> Any:
    from verl_bootstrap.lab.cluster.run import Target
    from verl_bootstrap.lab.cluster.srun import SlurmOptions

    given = [f"--{k}" for k in ("nodes", "time", "partition", "submit") if getattr(ns, k)]
    if given and not ns.slurm:
        raise InputError(f"{', '.join(given)}: Slurm's options, and --slurm is not given")
    options = SlurmOptions(nodes=ns.nodes, time=ns.time, partition=ns.partition, submit=ns.submit)
    return Target(
        ray_address=ns.ray_address, slurm=ns.slurm, ray_python=ns.ray_python, slurm_options=options
    )


def cmd_verify(ns: argparse.Namespace) -> int:
    """`cluster verify`: the node table; any difference or failed check exits non-zero."""
    from verl_bootstrap.lab.cluster.command import run_log, tool_on_nodes
    from verl_bootstrap.lab.cluster.run import TrainOnNodes, verify_cluster
    from verl_bootstrap.lab.cluster.table import table_text

    if ns.train and ns.fingerprint_only:
        raise InputError("--train and --fingerprint-only: a training step needs the checks")
    log = run_log()
    report = verify_cluster(
        _target(ns),
        ns.prefix,
        profile=ns.profile,
        fingerprint_only=ns.fingerprint_only,
        log_path=log,
        train=TrainOnNodes(ns.train, tool_on_nodes(ns.tool)) if ns.train else None,
    )
    if ns.json:
        emit_json(
            {"schema": "verl-bootstrap.cluster-verify/1", **report.to_json(), "log": str(log)}
        )
    else:
        out(table_text(report))
    return EXIT_OK if report.ok else EXIT_STEP_FAILED


def cmd_install(ns: argparse.Namespace) -> int:
    """`cluster install`: install on every node (once on a shared filesystem), then verify."""
    from verl_bootstrap.lab.cluster.command import install_args, run_log, tool_on_nodes
    from verl_bootstrap.lab.cluster.run import install_cluster
    from verl_bootstrap.lab.cluster.table import table_text

    node_args = install_args(ns.profile, ns.prefix, ns.lockfile, ns.config)
    command = [tool_on_nodes(ns.tool), "install", *node_args]
    if not ns.slurm and not ns.ray_address:
        raise InputError(
            "cluster install: which nodes?",
            hint="pass --slurm (inside an allocation) or --ray-address HOST:PORT",
        )
    if ns.dry_run:
        return _install_dry_run(ns, command)
    result = install_cluster(_target(ns), ns.prefix, command, log_path=run_log())
    if ns.json:
        verify = result.verify.to_json() if result.verify else None
        emit_json(
            {
                "schema": "verl-bootstrap.cluster-install/1",
                "ok": result.ok,
                "mode": result.mode,
                "lock_scope": result.scope.__dict__,
                "nodes": [dict(r) for r in result.results],
                "verify": verify,
            }
        )
        return EXIT_OK if result.ok else EXIT_STEP_FAILED
    err(f"prefix lock: {result.scope.scope} ({result.scope.reason})")
    for node in result.results:
        mark = "✓" if node.get("returncode") == 0 else "✗"
        out(f"{mark} install on {node.get('label')}: exit {node.get('returncode')}")
        if node.get("returncode") != 0:
            out("    " + "\n    ".join(node.get("tail") or []))
    if result.verify is not None:
        out(table_text(result.verify))
    return EXIT_OK if result.ok else EXIT_STEP_FAILED


def _install_dry_run(ns: argparse.Namespace, command: list[str]) -> int:
    """`cluster install --dry-run`: once from here or on each node, and the command; no node is
    asked and nothing is written."""
    from verl_bootstrap.lab.cluster.run import install_mode

    mode, scope = install_mode(ns.prefix, os.environ)
    where = "once, from this node" if mode == "once" else "on each node"
    target = f"the Ray cluster at {ns.ray_address}"
    if ns.slurm:
        target = f"a job of {ns.nodes} nodes srun asks for" if ns.submit else "the Slurm allocation"
    if ns.json:
        emit_json(
            {
                "schema": "verl-bootstrap.cluster-install/1",
                "dry_run": True,
                "mode": mode,
                "lock_scope": scope.__dict__,
                "command": command,
            }
        )
        return EXIT_OK
    out(f"would install {ns.prefix} {where} ({scope.fstype}: {scope.reason})")
    out(f"would run: {shlex.join(command)}")
    out(f"then would verify every node of {target}")
    return EXIT_OK


def cmd_script(ns: argparse.Namespace) -> int:
    """`cluster script --slurm`: the sbatch script."""
    from verl_bootstrap.lab.cluster.command import install_args, tool_on_nodes
    from verl_bootstrap.lab.cluster.nodescript import sbatch_script

    if ns.train and ns.action == "install":
        raise InputError(
            "--train goes with --action verify",
            hint="write the install's script, then a verify script with --train",
        )
    args = ["--prefix", ns.prefix]
    if ns.action == "install":
        args = install_args(ns.profile, ns.prefix, ns.lockfile, ns.config)
    elif ns.profile:
        args += ["--profile", ns.profile]
    if ns.train:
        args += ["--train", ns.train]
    text = sbatch_script(
        action=ns.action,
        tool=tool_on_nodes(ns.tool),
        args=args,
        nodes=ns.nodes,
        time=ns.time,
        partition=ns.partition,
    )
    if ns.output is None:
        out(text.rstrip("\n"))
    else:
        atomic_write(ns.output, text)
        err(f"wrote {ns.output}: submit it with `sbatch {ns.output}`")
    return EXIT_OK
