"""Every subcommand in one place: its name, one-line summary and examples. Its flags and handler
sit together in its own module, cli/commands/NAME.py (an action of a group, like `envs list`, in
its group's module), named as "module:function" strings so that only the chosen command's module
loads.

The parser, the command list of `--help`, "did you mean", the crash report's command name and
shell completion are all derived from COMMANDS; a new command is one entry here and one module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["COMMANDS", "NAMES", "Command", "find", "resolve"]

_CLI = "verl_bootstrap.cli"


@dataclass(frozen=True)
class Command:
    """One subcommand (or a group of actions, like `envs list`)."""

    name: str
    summary: str
    examples: tuple[str, ...] = ()
    flags: str = ""  # "module:function" that adds the flags to an argparse parser
    handler: str = ""  # "module:function" taking the parsed namespace, returning the exit code
    actions: tuple[Command, ...] = ()


def _c(
    name: str, summary: str, *examples: str, group: str = "", actions: tuple[Command, ...] = ()
) -> Command:
    """A command whose flags and handler are `flags_NAME` and `cmd_NAME` in cli/commands/NAME.py;
    an action of `group`, in cli/commands/GROUP.py. A group itself has neither (its actions do)."""
    key = name.replace("-", "_")
    module = f"commands.{group or key}"
    return Command(
        name=name,
        summary=summary,
        examples=tuple(examples),
        flags="" if actions else f"{module}:flags_{key}",
        handler="" if actions else f"{module}:cmd_{key}",
        actions=actions,
    )


COMMANDS: tuple[Command, ...] = (
    _c(
        "install",
        "build and verify an env (the default command: `verl-bootstrap --profile NAME`)",
        "verl-bootstrap --profile cpu",
        "verl-bootstrap --profile fsdp --cuda cu128 --prefix ~/envs/rl",
        "verl-bootstrap --prefix ~/envs/rl          # resume or re-verify an env",
    ),
    _c(
        "plan",
        "print the step graph of an install; run nothing",
        "verl-bootstrap plan --profile cpu",
        "verl-bootstrap plan --profile fsdp --cuda cu130 --json",
    ),
    _c(
        "verify",
        "check an env: imports, versions, pip check, the GPU smoke test",
        "verl-bootstrap verify                      # inside an activated env: that env",
        "verl-bootstrap verify cpu --json",
        "verl-bootstrap verify --prefix ~/envs/rl --against lockfiles/cpu/cpu-linux-64.lock.yaml",
    ),
    _c(
        "doctor",
        "check this machine (and an env) for the classic verl traps",
        "verl-bootstrap doctor --profile fsdp",
        "verl-bootstrap doctor --prefix ~/envs/rl --json",
    ),
    _c(
        "test",
        "run verl's own CPU tests in an env and classify each failure",
        "verl-bootstrap test cpu",
        "verl-bootstrap test cpu tests/utils/test_x_on_cpu.py::test_y -k 'not slow'",
        "verl-bootstrap test --prefix ~/envs/rl --collect-only --json",
    ),
    _c(
        "lock",
        "resolve profiles into lockfiles; install nothing",
        "verl-bootstrap lock --profile cpu",
        "verl-bootstrap lock --profile fsdp --cuda cu130",
        "verl-bootstrap lock --profile fsdp --dry-run  # the lockfiles it would regenerate",
        "verl-bootstrap lock --check",
    ),
    _c(
        "export",
        "write a lockfile in another tool's format",
        "verl-bootstrap export --format pylock --profile cpu > pylock.toml",
        "verl-bootstrap export --format apptainer --profile fsdp --cuda cu130 --output verl.def",
    ),
    _c(
        "bundle",
        "write one archive that installs a lockfile with no network",
        "verl-bootstrap bundle --profile cpu --cuda cpu --output verl-cpu.tar",
        "verl-bootstrap bundle --profile cpu --dry-run   # the archive and what goes in",
        "verl-bootstrap --bundle verl-cpu.tar --profile cpu --prefix ~/envs/verl",
    ),
    _c(
        "update",
        "re-resolve an env's profile for a newer stack: the diff, then apply",
        "verl-bootstrap update --prefix ~/envs/rl --dry-run",
        "verl-bootstrap update --prefix ~/envs/rl --yes",
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
                group="envs",
            ),
            _c(
                "prune",
                "forget the records of envs whose folder is gone",
                "verl-bootstrap envs prune --dry-run",
                "verl-bootstrap envs prune",
                group="envs",
            ),
        ),
    ),
    _c(
        "info",
        "how an env was made, its last run, each step",
        "verl-bootstrap info cpu",
        "verl-bootstrap info --prefix ~/envs/rl --json",
    ),
    _c(
        "remove",
        "delete an env (only what verl-bootstrap made)",
        "verl-bootstrap remove cpu --dry-run",
        "verl-bootstrap remove --prefix ~/envs/rl --yes",
    ),
    _c(
        "run",
        "run a command inside an env, activated, without changing your shell",
        "verl-bootstrap run cpu -- python -c 'import verl; print(verl.__version__)'",
        "verl-bootstrap run --prefix ~/envs/rl -- pytest -x tests/",
    ),
    _c(
        "activate",
        "print the lines that enter an env (eval them)",
        'eval "$(verl-bootstrap activate cpu)"',
        'eval "$(verl-bootstrap activate --prefix ~/envs/rl)"',
        "verl-bootstrap activate --prefix ~/envs/rl --shell fish | source",
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
                group="profiles",
            ),
            _c(
                "show",
                "a profile with inheritance and its verl ref's stack applied",
                "verl-bootstrap profiles show fsdp",
                "verl-bootstrap profiles show cpu --verl-ref v0.7.1 --json",
                group="profiles",
            ),
            _c(
                "validate",
                "check a profile file",
                "verl-bootstrap profiles validate my-lab.yaml",
                "verl-bootstrap profiles validate profiles/cpu.yaml --json",
                group="profiles",
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
                group="config",
            ),
        ),
    ),
    _c(
        "onboard",
        "a new lab member's env, from the lab config, in one go",
        "verl-bootstrap onboard --config https://lab.example/verl.yaml",
        "verl-bootstrap onboard --config lab.yaml --emit-script onboard.sh",
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
                group="cluster",
            ),
            _c(
                "install",
                "the locked install on every node",
                "verl-bootstrap cluster install --slurm --prefix /scratch/rl --lockfile lock.yaml",
                "verl-bootstrap cluster install --ray-address head:6379 --prefix /scratch/rl",
                group="cluster",
            ),
            _c(
                "script",
                "write the sbatch script for verify or install",
                "verl-bootstrap cluster script --slurm --nodes 4 --prefix /shared/envs/rl",
                "verl-bootstrap cluster script --slurm --nodes 2 --prefix /scratch/rl "
                "--action install --output job.sbatch",
                group="cluster",
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
                group="wheelhouse",
            ),
            _c(
                "add",
                "publish a wheel built elsewhere, with its key",
                "verl-bootstrap wheelhouse add flash_attn-2.8.3-cp312-linux_x86_64.whl "
                "--key-of ~/envs/rl",
                "verl-bootstrap wheelhouse add WHEEL --key torch=2.11.0,cuda=13.0,...  --json",
                group="wheelhouse",
            ),
            _c(
                "check",
                "rehash every wheel against the index",
                "verl-bootstrap wheelhouse check",
                "verl-bootstrap wheelhouse check --json",
                group="wheelhouse",
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
                group="kernels",
            ),
        ),
    ),
    _c(
        "completion",
        "print the shell completion script",
        "source <(verl-bootstrap completion --shell bash)",
        "verl-bootstrap completion --shell fish > ~/.config/fish/completions/verl-bootstrap.fish",
    ),
)

NAMES: frozenset[str] = frozenset(c.name for c in COMMANDS)


def find(name: str) -> Command | None:
    """The command called `name`, if there is one."""
    return next((c for c in COMMANDS if c.name == name), None)


def resolve(reference: str) -> Callable[..., Any]:
    """The function a "module:function" string names (a module given relative to cli/, as
    "commands.lock:flags_lock", is taken from verl_bootstrap.cli)."""
    module, _, function = reference.rpartition(":")
    if not module.startswith(f"{_CLI}."):
        module = f"{_CLI}.{module}"
    return getattr(importlib.import_module(module), function)  # type: ignore[no-any-return]
