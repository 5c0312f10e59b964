"""`remove`: delete an env (only what verl-bootstrap made), after saying what goes and asking."""

from __future__ import annotations

import argparse

from verl_bootstrap.cli.confirm import confirm
from verl_bootstrap.cli.flags import dry_run_flag, env_flag, json_flag, yes_flag
from verl_bootstrap.cli.output import emit_json, err, out
from verl_bootstrap.cli.planview import human_size
from verl_bootstrap.errors import EXIT_OK, InputError

__all__ = ["cmd_remove", "flags_remove"]


def flags_remove(p: argparse.ArgumentParser) -> None:
    """remove."""
    env_flag(p)
    yes_flag(p, "do not ask first")
    dry_run_flag(p, "show what would go; delete nothing")
    p.add_argument(
        "--keep-source",
        action="store_true",
        help="remove the env but keep verl's checkout (src/verl) as it is, with your work in it",
    )
    json_flag(p)


def cmd_remove(ns: argparse.Namespace) -> int:
    """`remove --prefix P`: what will go, a question, then the removal."""
    from verl_bootstrap.cli.optionsbuilder import chosen_env
    from verl_bootstrap.run.state.remove import check_removal, remove_env

    if ns.prefix is None and ns.env is None and ns.name is None:
        raise InputError(
            "remove: which env? name it (`verl-bootstrap remove NAME`) or give --prefix PATH",
            hint="`verl-bootstrap envs list` shows the envs and their names",
            data={"env": None, "prefix": None},  # neither given: a removal never guesses
        )
    prefix = ns.prefix.absolute() if ns.prefix is not None else chosen_env(ns, command="remove")
    if not prefix.exists():
        raise InputError(
            f"{prefix} is not there (deleted by hand?)",
            hint="`verl-bootstrap envs prune` forgets the records of envs whose folder is gone",
        )
    removal = check_removal(prefix, keep_source=ns.keep_source)
    kept = f", keeping {removal.kept}" if removal.kept else ""
    what = ", ".join(removal.entries) or "state only"
    err(f"remove {prefix} ({human_size(removal.size)}): {what}{kept}")
    if ns.dry_run:
        if ns.json:
            emit_json({"removed": None, "dry_run": True, "entries": list(removal.entries)})
        return EXIT_OK
    if not ns.yes:
        confirm("delete it? [y/N] ", f"{prefix} was not removed", "pass --yes to remove it")
    remove_env(prefix, keep_source=ns.keep_source)
    if ns.json:
        emit_json(
            {
                "removed": str(prefix),
                "entries": list(removal.entries),
                "kept": None if removal.kept is None else str(removal.kept),
            }
        )
    else:
        out(f"removed {prefix}{kept}")
    return EXIT_OK
