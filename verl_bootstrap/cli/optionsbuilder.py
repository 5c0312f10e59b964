"""The one options builder: every command turns its flags and the site config into RunOptions here.

Flags win over the site config; a command that lacks a flag gets RunOptions' default for it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.options import Declared, RunOptions, declared
from verl_bootstrap.paths import default_prefix

if TYPE_CHECKING:
    from verl_bootstrap.lock.format import Lockfile
    from verl_bootstrap.run.state.state import State

__all__ = [
    "chosen_env",
    "env_prefix",
    "named_env",
    "named_lock",
    "options_and_state",
    "profile_stem",
    "recorded_profile",
    "run_options",
    "scratch_options",
]


ACTIVE_ENV = "VERL_BOOTSTRAP_PREFIX"  # set by the env's activation script


def chosen_env(ns: argparse.Namespace, *, command: str) -> Path:
    """The env a command's ENV word, --name or --prefix names (see env_prefix)."""
    from verl_bootstrap.cli.flags import env_named

    return env_prefix(vars(ns).get("prefix"), command=command, name=env_named(ns))


def env_prefix(given: Path | None, *, command: str, name: str | None = None) -> Path:
    """The env a command that reads one works on: --prefix, else the env named `name` (a name
    `envs list` shows, or a folder), else the activated env's, else the only env there is. A
    folder that is not there is bad input, said as such (not as a missing file inside it); an
    env that is not the user's is refused (run/state/ownership.py)."""
    from verl_bootstrap.run.state.ownership import check_yours

    prefix = _env_prefix(given, command=command, name=name)
    check_yours(prefix, command=command)
    return prefix


def _env_prefix(given: Path | None, *, command: str, name: str | None) -> Path:
    if given is not None and name is not None:
        raise InputError(
            f"{command}: the env is given twice ({name!r} and --prefix {given})",
            hint="name it once: by its name, or by --prefix PATH",
            data={"name": name, "prefix": str(given)},
        )
    if given is None and name is not None:
        return named_env(name, command=command)
    active = os.environ.get(ACTIVE_ENV)
    prefix = given if given is not None else Path(active) if active else None
    if prefix is None:
        return _only_env(command)
    if not prefix.is_dir():
        where = "--prefix" if given is not None else f"${ACTIVE_ENV}"
        raise InputError(
            f"{command}: {where} {prefix} is not a folder",
            hint="`verl-bootstrap envs list` shows the envs there are",
            data={"prefix": str(prefix), "from": where, "folder": False},
        )
    return prefix.absolute()


def named_env(name: str, *, command: str) -> Path:
    """The env called `name` (its folder's name, as `envs list` shows it); a word with a slash,
    or ~ or . first, is the env's folder itself."""
    from verl_bootstrap.run.state.envindex import env_name, live_prefixes

    if "/" in name or name.startswith(("~", ".")):
        return _env_prefix(Path(name).expanduser(), command=command, name=None)
    envs = live_prefixes()
    found = [p for p in envs if env_name(p) == name]
    if len(found) > 1:
        raise InputError(
            f"{command}: {len(found)} envs are named {name!r}: " + ", ".join(str(p) for p in found),
            hint=f"name the one you mean by its folder: --prefix {found[0]}",
            data={"name": name, "prefixes": [str(p) for p in found]},
        )
    if not found:
        from verl_bootstrap.cli.argparser import did_you_mean

        names = sorted({env_name(p) for p in envs})
        guess = did_you_mean(name, names)
        raise InputError(
            f"{command}: no env is named {name!r}"
            + (f"; did you mean {guess!r}?" if guess else ""),
            hint=f"the envs: {', '.join(names)}" if names else _NO_ENV_HINT,
            data={"name": name, "suggestion": guess, "envs": names},
        )
    return found[0]


_NO_ENV_HINT = "`verl-bootstrap --profile NAME` builds one (`verl-bootstrap envs list` lists them)"


def _only_env(command: str) -> Path:
    """No env named and none active: the one env there is, when there is exactly one."""
    from verl_bootstrap.run.state.envindex import env_name, live_prefixes

    envs = live_prefixes()
    if len(envs) == 1:
        return envs[0]
    if not envs:
        raise InputError(
            f"{command}: no env named, none is active, and none is built yet",
            hint=_NO_ENV_HINT,
            data={"envs": []},
        )
    listed = ", ".join(f"{env_name(p)} ({p})" for p in envs)
    raise InputError(
        f"{command}: which env? none is named and none is active, and there are {len(envs)}: "
        f"{listed}",
        hint=f"name one: `verl-bootstrap {command} NAME` (or --prefix PATH), or enter one "
        'first: eval "$(verl-bootstrap activate NAME)"',
        data={"envs": [{"name": env_name(p), "prefix": str(p)} for p in envs]},
    )


def recorded_profile(prefix: Path) -> str | None:
    """The profile the env at `prefix` was made with, from its record."""
    recorded = _recorded(_state(prefix))
    profile = (recorded or {}).get("profile")
    return profile if isinstance(profile, str) else None


def profile_stem(profile: str) -> str:
    """The env's name for a profile given by name or by file (`lab/fsdp.yaml` -> `fsdp`)."""
    return profile.rsplit("/", 1)[-1].removesuffix(".yaml").removesuffix(".yml")


def run_options(ns: argparse.Namespace, **fixed: Any) -> RunOptions:
    """RunOptions from `ns` over the env's record over the site config's settings; `fixed` fields
    are the command's own (lock resolves into a scratch prefix, for one variant)."""
    return options_and_state(ns, **fixed)[0]


def options_and_state(ns: argparse.Namespace, **fixed: Any) -> tuple[RunOptions, State | None]:
    """The run's options, and the state of the env at its prefix as read for them (None for a
    command's own scratch prefix): a run reads the state once and passes it on.

    A flag left out takes the value recorded in the env at --prefix, so `--prefix P` alone
    resumes P as it was made (verl_bootstrap.run.state.resume).
    """
    from verl_bootstrap.machine.host.indexes import parse_index_flags
    from verl_bootstrap.plan.doctor.checklist import known_checks
    from verl_bootstrap.run.state.resume import merge_indexes, merge_options
    from verl_bootstrap.siteconfig import load_site, named_indexes, site_options
    from verl_bootstrap.siteconfig.files import local_profile, site_lockfile

    flag = vars(ns).get
    known_checks(flag("skip_check") or ())
    flags = parse_index_flags(tuple(flag("index") or ()))
    given = {**_given_flags(ns), "indexes": flags}
    if "profile" in fixed:
        given["profile"] = fixed.pop("profile")
    own_prefix = "prefix" not in fixed  # lock's scratch prefix has no record
    given_prefix = flag("prefix") if not own_prefix else _target(ns)
    state = _state(given_prefix) if own_prefix and given_prefix else None
    recorded = _recorded(state)
    values = _locked_without_tests(merge_options(given, recorded), given)
    site = load_site(values["config"])
    profile = values["profile"] or local_profile(site.config.defaults.profile or "", os.environ)
    if not profile:
        raise InputError(
            "no --profile given, and no site config names a default profile",
            hint="pass --profile NAME (see `verl-bootstrap profiles list`)",
        )
    envs_dir = site.config.defaults.envs_dir
    name = flag("name") or profile_stem(profile)
    prefix = given_prefix or (Path(envs_dir) / name if envs_dir else default_prefix(name))
    if state is None and own_prefix:  # the default prefix's record
        state = _state(Path(prefix))
        recorded = _recorded(state)
        values = _locked_without_tests(
            merge_options({**given, "profile": profile}, recorded), given
        )
    _check_prefix(Path(prefix))
    indexes = merge_indexes(named_indexes(site.config), (recorded or {}).get("indexes"), flags)
    lockfile = _path(values["lockfile"])
    if lockfile is None and (values["locked"] or values["frozen"]):
        lockfile = site_lockfile(site, os.environ)  # the lab's lockfile, when it names one
    chosen = {
        **_chosen(values, ns),
        "profile": profile,
        "prefix": Path(prefix).absolute(),
        "indexes": tuple(indexes.items()),
        "site": site_options(site),
        "lockfile": lockfile,
        "cuda_arch": _cuda_archs(values["cuda_arch"] or ()),
    }
    if chosen.get("python") is not None:  # a path or X.Y, checked once here
        from verl_bootstrap.machine.host.interpreters import interpreter_for

        chosen["python"] = interpreter_for(str(chosen["python"]))
    return RunOptions(**{**chosen, **fixed}), state


def _target(ns: argparse.Namespace) -> Path | None:
    """The env an install or plan works on when the user named one: --prefix; else --name, an
    env of that name (None: a new env of that name goes in the envs folder); else, inside an
    activated env, that env, unless --profile names another profile than the env's."""
    flag = vars(ns).get
    if flag("prefix") is not None and flag("name") is not None:
        raise InputError(
            f"--name {flag('name')} and --prefix {flag('prefix')} both name the env",
            hint="give one: --name NAME (an env in the envs folder) or --prefix PATH",
        )
    if flag("prefix") is not None:
        return Path(str(flag("prefix")))
    if flag("name") is not None:
        return _existing(str(flag("name")))
    active = os.environ.get(ACTIVE_ENV)
    if not active or not Path(active).is_dir():
        return None
    profile = flag("profile")
    if profile and profile_stem(profile) != profile_stem(recorded_profile(Path(active)) or ""):
        return None  # another profile: its own env, not the active one
    return Path(active)


def _existing(name: str) -> Path | None:
    """The env called `name` if there is one (a new env of that name: None)."""
    from verl_bootstrap.run.state.envindex import named

    if "/" in name or name in (".", ".."):
        raise InputError(
            f"--name {name!r} is a path, not a name", hint=f"for a folder: --prefix {name}"
        )
    found = named(name)
    if len(found) > 1:
        return named_env(name, command="install")  # refused, listing them
    return found[0] if found else None


def _locked_without_tests(values: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """A lockfile install (--locked, --frozen, --lockfile) of an env made --with-tests: the
    lockfile holds no test stages, so the recorded choice gives way (said), the test tools
    already in the env stay; --with-tests given with it is still refused (run.installrun)."""
    lock_mode = given.get("locked") or given.get("frozen") or given.get("lockfile")
    if not (lock_mode and values.get("with_tests") and given.get("with_tests") is None):
        return values
    from verl_bootstrap.cli.output import err

    err(
        "note: this env was made --with-tests; a lockfile install holds no test stages, so its "
        "test tools are left as they are (run without --locked, with --with-tests, to update them)"
    )
    return {**values, "with_tests": False}


def _cuda_archs(values: Sequence[str]) -> tuple[str, ...]:
    """--cuda-arch 9.0 --cuda-arch 10.0, or --cuda-arch 9.0,10.0."""
    from verl_bootstrap.siteconfig.settings import check_cuda_arch

    archs = [v.strip() for value in values for v in value.split(",") if v.strip()]
    try:
        return tuple(check_cuda_arch(a) for a in archs)
    except ValueError as exc:
        raise InputError(f"--cuda-arch: {exc}") from None


def _check_prefix(prefix: Path) -> None:
    """The env goes in a folder: a file (or a link to one) there is the user's, not ours."""
    if prefix.exists() and not prefix.is_dir():
        raise InputError(
            f"--prefix {prefix} is a file, not a folder",
            hint="name a new folder (or an env made by verl-bootstrap) for the env",
        )
    if "\n" in str(prefix) or "\r" in str(prefix):
        raise InputError(
            f"--prefix {str(prefix)!r} holds a line break",
            hint="choose a folder name without control characters",
        )


def _given_flags(ns: argparse.Namespace) -> dict[str, Any]:
    """The recorded options' flags as parsed: None, [] or False where the user left one out."""
    flag = vars(ns).get
    given: dict[str, Any] = {}
    for option in declared(RunOptions):
        if option.spec.flags and option.spec.recorded:
            value = flag(option.spec.dest)
            kind = option.spec.kind
            given[option.name] = (
                value  # a toggle: None left out, False said off
                if kind == "toggle"
                else bool(value)
                if kind == "switch"
                else list(value or ())
                if kind == "repeat"
                else value
            )
    return given


def _chosen(values: dict[str, Any], ns: argparse.Namespace) -> dict[str, Any]:
    """Each declared option's value: the merged flag or record (a flag for an option the record
    does not keep), made the field's type; left out, the field's default."""
    chosen: dict[str, Any] = {}
    for option in declared(RunOptions):
        if not option.spec.flags:
            continue
        value = values.get(option.name) if option.spec.recorded else vars(ns).get(option.spec.dest)
        chosen[option.name] = _typed(option, value)
    return chosen


def _typed(option: Declared, value: Any) -> Any:
    kind = option.spec.kind
    if kind in ("switch", "toggle"):
        return bool(value)
    if kind == "repeat":
        return tuple(value or ())
    if kind == "path":
        return _path(value)
    return value or option.default if option.default is not None else value


def _state(prefix: Path) -> State:
    """The state of the env at `prefix` (empty when there is none yet); refused when the env is
    not the user's: a recorded option may name a program (`--python`), which `plan` runs."""
    from verl_bootstrap.paths import state_file
    from verl_bootstrap.run.state.ownership import check_yours
    from verl_bootstrap.run.state.state import State

    check_yours(Path(prefix).absolute())
    return State.load(state_file(Path(prefix).absolute()))


def _recorded(state: State | None) -> dict[str, Any] | None:
    """The options recorded in the env, if it has a record."""
    from verl_bootstrap.run.state.envrecord import record_in

    record = None if state is None else record_in(state)
    return None if record is None else dict(record["options"])


def _path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


def scratch_options(ns: argparse.Namespace, profile: str, cuda: str) -> RunOptions:
    """The run options of a command that installs nothing (lock, export, bundle: its prefix is a
    scratch folder; the user's indexes and channels for the lock are locking.origins')."""
    scratch = Path(tempfile.gettempdir()) / "verl-bootstrap-lock"  # nothing is installed there
    return run_options(ns, profile=profile, cuda=cuda, prefix=scratch)


def named_lock(ns: argparse.Namespace) -> tuple[Lockfile, Path]:
    """The lockfile --lockfile names, else this folder's or the committed one of
    --profile/--cuda/--platform; the first line on stderr names it (and the variant chosen, when
    there was a choice)."""
    from verl_bootstrap.cli.output import err
    from verl_bootstrap.lock.lockroute import read_line
    from verl_bootstrap.lock.making.lockcommand import named_lockfile

    named = named_lockfile(ns.command, ns.lockfile, ns.profile, ns.cuda, ns.platform)
    if not ns.json:
        err(read_line(named.path, named.lock.exclude_newer))
    if named.note:
        err(f"note: {named.note}")
    return named.lock, named.path
