"""Flags that several commands share, each declared once here: its spelling, argparse kind,
choices and metavar. A command words a shared flag's help for itself (`--profile` of `lock` is
not `--profile` of `verify`), so the help is an argument; a command never spells a shared flag
itself (tests/test_cli_help.py checks both). The install options' flags are derived from their
declarations on RunOptions (verl_bootstrap.options), so a new option is one field there."""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from verl_bootstrap.cli.output import path_arg, seconds_arg
from verl_bootstrap.errors import InputError
from verl_bootstrap.options import CONFIG_HELP, Declared, RunOptions, declared

__all__ = [
    "INDEX_OPTIONS",
    "SHARED_FLAGS",
    "SHELLS",
    "SOURCE_OPTIONS",
    "bundle_flag",
    "config_flag",
    "cuda_flag",
    "dry_run_flag",
    "env_flag",
    "env_named",
    "install_option_flags",
    "json_flag",
    "lock_source_flags",
    "lockfile_flag",
    "name_flag",
    "option_flags",
    "output_beside",
    "platform_flag",
    "prefix_flag",
    "profile_flag",
    "renamed",
    "shell_flag",
    "skip_check_flag",
    "train_flag",
    "verl_ref_flag",
    "yes_flag",
]

# the flags declared here: a command's module adds them only through these functions
SHARED_FLAGS = (
    "--profile",
    "--cuda",
    "--platform",
    "--prefix",
    "--name",
    "--config",
    "--lockfile",
    "--verl-ref",
    "--skip-check",
    "--train",
    "--shell",
    "--dry-run",
    "--yes",
    "--json",
    "--bundle",
)
SHELLS = ("bash", "zsh", "fish")

# where verl comes from, and where packages come from: what the lockfile commands take
SOURCE_OPTIONS = ("verl_source", "verl_ref", "allow_unsupported_ref")
INDEX_OPTIONS = ("backend", "indexes", "channels", "offline")


def option_flags(
    p: argparse.ArgumentParser,
    names: Collection[str] | None = None,
    *,
    command: str = "install",
    helps: Mapping[str, str] | None = None,
    cls: type[RunOptions] | None = None,
) -> dict[str, Any]:
    """Add the flags of the declared options `names` (default: every one `command` takes, in
    `--help` groups by their declared group: where, what, sources, behaviour); `helps` words a
    flag's help for this command. Returns the groups, for the command's own flags."""
    exclusive: dict[str, Any] = {}
    groups: dict[str, Any] = (
        {g: p.add_argument_group(title) for g, title in GROUP_TITLES.items()}
        if names is None
        else {}
    )
    for option in declared(cls or RunOptions):
        spec = option.spec
        if not spec.flags or (names is not None and option.name not in names):
            continue
        if names is None and command != "install" and not spec.on_plan:
            continue
        target: Any = groups.get(spec.group, p)
        if spec.exclusive:
            if spec.exclusive not in exclusive:
                exclusive[spec.exclusive] = target.add_mutually_exclusive_group()
            target = exclusive[spec.exclusive]
        target.add_argument(*spec.flags, **_argparse_kwargs(option, (helps or {}).get(option.name)))
    return groups


GROUP_TITLES = {
    "where": "where the env goes",
    "what": "what it installs",
    "sources": "where packages and verl come from",
    "behaviour": "how the run behaves",
}


def _argparse_kwargs(option: Declared, help_text: str | None) -> dict[str, Any]:
    spec = option.spec
    kwargs: dict[str, Any] = {"help": help_text or spec.help}
    if spec.kind == "switch":
        kwargs["action"] = "store_true"
    elif spec.kind == "toggle":  # --NAME / --no-NAME; None when neither is given
        kwargs.update(action=argparse.BooleanOptionalAction, default=None)
    elif spec.kind == "repeat":
        kwargs.update(action="append", default=[])
    elif spec.kind == "path":
        kwargs["type"] = path_arg
    elif spec.kind == "number":
        kwargs.update(type=seconds_arg, default=option.default)  # --wait, the one number flag
    if spec.choices:
        kwargs["choices"] = list(spec.choices)
    if spec.metavar:
        kwargs["metavar"] = spec.metavar
    return kwargs


def install_option_flags(p: argparse.ArgumentParser, command: str) -> Any:
    """Every install option, as RunOptions declares it, in its --help group (install's and
    plan's); returns the group the command's own behaviour flags join."""
    groups = option_flags(p, command=command)
    name_flag(
        groups["where"],
        "the env by name: an env `envs list` shows, else a new one in the envs folder "
        "(default: the activated env, else the profile's name)",
    )
    bundle_flag(groups["sources"])
    json_flag(groups["behaviour"])
    return groups["behaviour"]


def lock_source_flags(p: argparse.ArgumentParser) -> None:
    """Where a lock's packages and verl come from, and --json (lock, export, bundle)."""
    option_flags(
        p, (*INDEX_OPTIONS, *SOURCE_OPTIONS), helps={"offline": "resolve from uv's cache only"}
    )
    json_flag(p)


Container = argparse._ActionsContainer  # a parser, or a group of its flags
_REPEATED: dict[str, Any] = {"action": "append", "default": []}  # a list, one item each time


def profile_flag(p: Container, help: str, *, repeat: bool = False) -> None:
    """--profile: a shipped profile's name or a YAML file (`repeat`: several, as a list)."""
    p.add_argument("--profile", help=help, **(_REPEATED if repeat else {}))


def cuda_flag(p: Container, help: str) -> None:
    """--cuda: a CUDA variant (auto | cpu | cuXYZ), a plain word each command checks itself."""
    p.add_argument("--cuda", help=help)


def platform_flag(p: Container) -> None:
    """--platform of a lockfile command: the platform whose lockfile."""
    p.add_argument("--platform", default="linux-64", help="linux-64 (default) or linux-aarch64")


def prefix_flag(p: Container, help: str, *, on_nodes: bool = False) -> None:
    """--prefix: an env's folder; `on_nodes`: a folder on the cluster's nodes, required, kept as
    written (the nodes' shell expands it, as $SLURMD_NODENAME)."""
    kind: dict[str, Any] = {"required": True} if on_nodes else {"type": path_arg}
    p.add_argument("--prefix", help=help, **kind)


def name_flag(p: Container, help: str) -> None:
    """--name: an env by its name, as `envs list` shows it."""
    p.add_argument("--name", help=help)


def config_flag(
    p: Container,
    help: str = CONFIG_HELP,
    *,
    required: bool = False,
    metavar: str | None = "FILE_OR_URL",
) -> None:
    """--config: the site config to read (a file or a URL)."""
    p.add_argument("--config", required=required, metavar=metavar, help=help)


def lockfile_flag(p: Container, help: str, *, url: bool = False) -> None:
    """--lockfile: a lockfile here (a path), or `url`: one a node or the lab config names, kept
    as written (a URL is no path)."""
    p.add_argument("--lockfile", type=str if url else path_arg, help=help)


def verl_ref_flag(p: Container, help: str) -> None:
    """--verl-ref: a verl tag, branch or commit."""
    p.add_argument("--verl-ref", help=help)


def skip_check_flag(p: Container, help: str) -> None:
    """--skip-check NAME, repeatable: a check of doctor's registry, by name."""
    p.add_argument("--skip-check", action="append", default=[], metavar="NAME", help=help)


def train_flag(p: Container, help: str) -> None:
    """--train of a verification: one real verl training step, sft or rl."""
    p.add_argument("--train", choices=("sft", "rl"), help=help)


def shell_flag(p: Container, help: str, *, repeat: bool = False) -> None:
    """--shell: bash, zsh or fish (`repeat`: several, as a list)."""
    p.add_argument("--shell", choices=list(SHELLS), help=help, **(_REPEATED if repeat else {}))


def yes_flag(p: Container, help: str) -> None:
    """--yes/-y: go on without asking."""
    p.add_argument("--yes", "-y", action="store_true", help=help)


_BUNDLE_HELP = "install from an offline bundle (`verl-bootstrap bundle`): no network at all"


def bundle_flag(p: Container, help: str = _BUNDLE_HELP, *, metavar: str | None = "PATH") -> None:
    """--bundle: an offline bundle's archive (`verl-bootstrap bundle` writes one)."""
    p.add_argument("--bundle", type=path_arg, metavar=metavar, help=help)


def dry_run_flag(p: Container, help: str) -> None:
    """--dry-run of a command that changes something: `help` says what it shows instead."""
    p.add_argument("--dry-run", action="store_true", help=help)


def json_flag(p: Container) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document")


def renamed(p: argparse.ArgumentParser, old: str, new: str, why: str) -> None:
    """Refuse `old`, a flag that means something else in this command, naming `new`."""

    class _Renamed(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> None:
            parser.error(f"{old} is spelled {new} here ({why})")

    p.add_argument(old, action=_Renamed, nargs="?", help=argparse.SUPPRESS)


def env_flag(p: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """The env of a command that reads an existing one: ENV (its name or folder), --name or
    --prefix; none given, the activated env, else the only env there is."""
    if positional:
        p.add_argument(
            "env",
            nargs="?",
            metavar="ENV",
            help="the env's name as `envs list` shows it, or its folder "
            "(default: the activated env, else the only one)",
        )
    where = p.add_mutually_exclusive_group()
    name_flag(where, "the env's name (as `envs list` shows it)")
    prefix_flag(where, "the env's folder (default: the activated one, $VERL_BOOTSTRAP_PREFIX)")


def output_beside(output: Path) -> Path:
    """`--output`, whose folder must be there: a typo in it is refused (exit 2), never made
    into a new tree of folders."""
    folder = output.absolute().parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(
            f"--output {output}: {folder} {what}", hint=f"create it first (mkdir -p {folder})"
        )
    return output


def env_named(ns: argparse.Namespace) -> str | None:
    """The env's name as given: the ENV word or --name (both: the word, refused if they differ)."""
    word, flag = vars(ns).get("env"), vars(ns).get("name")
    if word is not None and flag is not None and word != flag:
        raise InputError(f"the env is given twice: {word!r} and --name {flag}", hint="name it once")
    return word if word is not None else flag
