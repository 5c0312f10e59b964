"""Every subcommand in one place: its name, one-line summary, examples, and (a leaf) its wiring:
the functions that add its flags and run it, `flags_NAME` and `cmd_NAME` in cli/commands/NAME.py
(an action of a group, like `envs list`, in its group's module).

The parser, the command list of `--help`, "did you mean", the crash report's command name and
shell completion are all derived from COMMANDS; a new command is one entry here and one module
(named in cli/commands/__init__.py too, which a test checks against the folder).

Why the wiring is a lambda naming the functions: a handler is an ordinary attribute reference, so
mypy checks its signature against `Wire`, and an editor or a dead-code tool finds its one use here;
yet nothing is imported until the lambda runs. `commands` is the package alone (its __getattr__
imports a submodule on first use), so start-up loads only the chosen command's module, as the
"module:function" strings this replaced did, and no module or function is named in a string.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from verl_bootstrap.cli import commands

__all__ = ["COMMANDS", "NAMES", "Command", "Flags", "Handler", "Wire", "find"]

Flags = Callable[[argparse.ArgumentParser], None]  # adds a command's flags to its parser
Handler = Callable[[argparse.Namespace], int]  # runs the command; returns the exit code
Wire = Callable[[], tuple[Flags, Handler]]  # imports the command's module; its two functions


@dataclass(frozen=True)
class Command:
    """One subcommand (or a group of actions, like `envs list`: a group has no wire)."""

    name: str
    summary: str
    examples: tuple[str, ...] = ()
    wire: Wire | None = None
    actions: tuple[Command, ...] = ()


def _c(
    name: str,
    summary: str,
    *examples: str,
    wire: Wire | None = None,
    actions: tuple[Command, ...] = (),
) -> Command:
    return Command(name, summary, tuple(examples), wire, actions)


COMMANDS: tuple[Command, ...] = (
    _c(
        "install",
        "build and verify an env (the default command: `verl-bootstrap --profile NAME`)",
        "verl-bootstrap --profile cpu",
        "verl-bootstrap --profile fsdp --cuda cu128 --prefix ~/envs/rl",
        "verl-bootstrap --prefix ~/envs/rl          # resume or re-verify an env",
        wire=lambda: (commands.install.flags_install, commands.install.cmd_install),
    ),
    _c(
        "plan",
        "print the step graph of an install; run nothing",
        "verl-bootstrap plan --profile cpu",
        "verl-bootstrap plan --profile fsdp --cuda cu130 --json",
        wire=lambda: (commands.plan.flags_plan, commands.plan.cmd_plan),
    ),
    _c(
        "verify",
        "check an env: imports, versions, pip check, the GPU smoke test",
        "verl-bootstrap verify                      # inside an activated env: that env",
        "verl-bootstrap verify cpu --json",
        "verl-bootstrap verify --prefix ~/envs/rl --against lockfiles/cpu/cpu-linux-64.lock.yaml",
        wire=lambda: (commands.verify.flags_verify, commands.verify.cmd_verify),
    ),
    _c(
        "doctor",
        "check this machine (and an env) for the classic verl traps",
        "verl-bootstrap doctor --profile fsdp",
        "verl-bootstrap doctor --prefix ~/envs/rl --json",
        wire=lambda: (commands.doctor.flags_doctor, commands.doctor.cmd_doctor),
    ),
    _c(
        "test",
        "run verl's own CPU tests in an env and classify each failure",
        "verl-bootstrap test cpu",
        "verl-bootstrap test cpu tests/utils/test_x_on_cpu.py::test_y -k 'not slow'",
        "verl-bootstrap test --prefix ~/envs/rl --collect-only --json",
        wire=lambda: (commands.test.flags_test, commands.test.cmd_test),
    ),
    _c(
        "lock",
        "resolve profiles into lockfiles; install nothing",
        "verl-bootstrap lock --profile cpu",
        "verl-bootstrap lock --profile fsdp --cuda cu130",
        "verl-bootstrap lock --profile fsdp --dry-run  # the lockfiles it would regenerate",
        "verl-bootstrap lock --check",
        wire=lambda: (commands.lock.flags_lock, commands.lock.cmd_lock),
    ),
    _c(
        "export",
        "write a lockfile in another tool's format",
        "verl-bootstrap export --format pylock --profile cpu > pylock.toml",
        "verl-bootstrap export --format apptainer --profile fsdp --cuda cu130 --output verl.def",
        wire=lambda: (commands.export.flags_export, commands.export.cmd_export),
    ),
    _c(
        "bundle",
        "write one archive that installs a lockfile with no network",
        "verl-bootstrap bundle --profile cpu --cuda cpu --output verl-cpu.tar",
        "verl-bootstrap bundle --profile cpu --dry-run   # the archive and what goes in",
        "verl-bootstrap --bundle verl-cpu.tar --profile cpu --prefix ~/envs/verl",
        wire=lambda: (commands.bundle.flags_bundle, commands.bundle.cmd_bundle),
    ),
    _c(
        "update",
        "re-resolve an env's profile for a newer stack: the diff, then apply",
        "verl-bootstrap update --prefix ~/envs/rl --dry-run",
        "verl-bootstrap update --prefix ~/envs/rl --yes",
        wire=lambda: (commands.update.flags_update, commands.update.cmd_update),
    ),
    _c(
        "envs",
        "the envs verl-bootstrap has built",
        "verl-bootstrap envs list",
        "verl-bootstrap envs prune --dry-run",
        actions=(
            _c(
                "list",
                "every env: status, profile, verl, variant, size",
                "verl-bootstrap envs list",
                "verl-bootstrap envs list --no-size --json",
                wire=lambda: (commands.envs.flags_list, commands.envs.cmd_list),
            ),
            _c(
                "prune",
                "forget the records of envs whose folder is gone",
                "verl-bootstrap envs prune --dry-run",
                "verl-bootstrap envs prune",
                wire=lambda: (commands.envs.flags_prune, commands.envs.cmd_prune),
            ),
        ),
    ),
    _c(
        "info",
        "how an env was made, its last run, each step",
        "verl-bootstrap info cpu",
        "verl-bootstrap info --prefix ~/envs/rl --json",
        wire=lambda: (commands.info.flags_info, commands.info.cmd_info),
    ),
    _c(
        "remove",
        "delete an env (only what verl-bootstrap made)",
        "verl-bootstrap remove cpu --dry-run",
        "verl-bootstrap remove --prefix ~/envs/rl --yes",
        wire=lambda: (commands.remove.flags_remove, commands.remove.cmd_remove),
    ),
    _c(
        "run",
        "run a command inside an env, activated, without changing your shell",
        "verl-bootstrap run cpu -- python -c 'import verl; print(verl.__version__)'",
        "verl-bootstrap run --prefix ~/envs/rl -- pytest -x tests/",
        wire=lambda: (commands.run.flags_run, commands.run.cmd_run),
    ),
    _c(
        "activate",
        "print the lines that enter an env (eval them)",
        'eval "$(verl-bootstrap activate cpu)"',
        'eval "$(verl-bootstrap activate --prefix ~/envs/rl)"',
        "verl-bootstrap activate --prefix ~/envs/rl --shell fish | source",
        wire=lambda: (commands.activate.flags_activate, commands.activate.cmd_activate),
    ),
    _c(
        "profiles",
        "list, show or validate profiles",
        "verl-bootstrap profiles list",
        "verl-bootstrap profiles show fsdp",
        actions=(
            _c(
                "list",
                "the shipped profiles and their CUDA variants",
                "verl-bootstrap profiles list",
                "verl-bootstrap profiles list --json",
                wire=lambda: (commands.profiles.flags_list, commands.profiles.cmd_list),
            ),
            _c(
                "show",
                "a profile with inheritance and its verl ref's stack applied",
                "verl-bootstrap profiles show fsdp",
                "verl-bootstrap profiles show cpu --verl-ref v0.7.1 --json",
                wire=lambda: (commands.profiles.flags_show, commands.profiles.cmd_show),
            ),
            _c(
                "validate",
                "check a profile file",
                "verl-bootstrap profiles validate my-lab.yaml",
                "verl-bootstrap profiles validate profiles/cpu.yaml --json",
                wire=lambda: (commands.profiles.flags_validate, commands.profiles.cmd_validate),
            ),
        ),
    ),
    _c(
        "config",
        "the site config: mirrors, proxies, caches, defaults",
        "verl-bootstrap config show",
        "verl-bootstrap config show --config lab.yaml --json",
        actions=(
            _c(
                "show",
                "the effective settings and where each came from",
                "verl-bootstrap config show",
                "verl-bootstrap config show --json",
                wire=lambda: (commands.config.flags_show, commands.config.cmd_show),
            ),
        ),
    ),
    _c(
        "onboard",
        "a new lab member's env, from the lab config, in one go",
        "verl-bootstrap onboard --config https://lab.example/verl.yaml",
        "verl-bootstrap onboard --config lab.yaml --emit-script onboard.sh",
        wire=lambda: (commands.onboard.flags_onboard, commands.onboard.cmd_onboard),
    ),
    _c(
        "cluster",
        "verify or install an env on every node (Ray, Slurm)",
        "verl-bootstrap cluster verify --ray-address head:6379 --prefix /shared/envs/rl",
        "verl-bootstrap cluster script --slurm --nodes 4 --prefix /shared/envs/rl",
        actions=(
            _c(
                "verify",
                "check every node's env and compare the nodes",
                "verl-bootstrap cluster verify --ray-address head:6379 --prefix /shared/envs/rl",
                "verl-bootstrap cluster verify --slurm --prefix /shared/envs/rl --json",
                wire=lambda: (commands.cluster.flags_verify, commands.cluster.cmd_verify),
            ),
            _c(
                "install",
                "the locked install on every node",
                "verl-bootstrap cluster install --slurm --prefix /scratch/rl --lockfile lock.yaml",
                "verl-bootstrap cluster install --ray-address head:6379 --prefix /scratch/rl",
                wire=lambda: (commands.cluster.flags_install, commands.cluster.cmd_install),
            ),
            _c(
                "script",
                "write the sbatch script for verify or install",
                "verl-bootstrap cluster script --slurm --nodes 4 --prefix /shared/envs/rl",
                "verl-bootstrap cluster script --slurm --nodes 2 --prefix /scratch/rl "
                "--action install --output job.sbatch",
                wire=lambda: (commands.cluster.flags_script, commands.cluster.cmd_script),
            ),
        ),
    ),
    _c(
        "wheelhouse",
        "the lab's prebuilt kernel wheels: list, add, check",
        "verl-bootstrap wheelhouse list",
        "verl-bootstrap wheelhouse check --json",
        actions=(
            _c(
                "list",
                "each wheel with its build key and sha256",
                "verl-bootstrap wheelhouse list",
                "verl-bootstrap wheelhouse list --json",
                wire=lambda: (commands.wheelhouse.flags_list, commands.wheelhouse.cmd_list),
            ),
            _c(
                "add",
                "publish a wheel built elsewhere, with its key",
                "verl-bootstrap wheelhouse add flash_attn-2.8.3-cp312-linux_x86_64.whl "
                "--key-of ~/envs/rl",
                "verl-bootstrap wheelhouse add WHEEL --key torch=2.11.0,cuda=13.0,...  --json",
                wire=lambda: (commands.wheelhouse.flags_add, commands.wheelhouse.cmd_add),
            ),
            _c(
                "check",
                "rehash every wheel against the index",
                "verl-bootstrap wheelhouse check",
                "verl-bootstrap wheelhouse check --json",
                wire=lambda: (commands.wheelhouse.flags_check, commands.wheelhouse.cmd_check),
            ),
        ),
    ),
    _c(
        "kernels",
        "prebuilt kernel wheels: which source serves each shipped stack",
        "verl-bootstrap kernels coverage",
        actions=(
            _c(
                "coverage",
                "for each shipped profile x CUDA variant x platform, the source of "
                "each kernel stage, or why it builds and what that costs",
                "verl-bootstrap kernels coverage            # offline, from the recorded lists",
                "verl-bootstrap kernels coverage --profile fsdp --config site.yaml --json",
                "verl-bootstrap kernels coverage --refresh  # ask each source again (network)",
                wire=lambda: (commands.kernels.flags_coverage, commands.kernels.cmd_coverage),
            ),
        ),
    ),
    _c(
        "completion",
        "print the shell completion script",
        "source <(verl-bootstrap completion --shell bash)",
        "verl-bootstrap completion --shell fish > ~/.config/fish/completions/verl-bootstrap.fish",
        wire=lambda: (commands.completion.flags_completion, commands.completion.cmd_completion),
    ),
)

NAMES: frozenset[str] = frozenset(c.name for c in COMMANDS)


def find(name: str) -> Command | None:
    """The command called `name`, if there is one."""
    return next((c for c in COMMANDS if c.name == name), None)
