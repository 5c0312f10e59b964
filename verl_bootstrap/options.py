"""The run's options, built once by the CLI and passed explicitly (no globals).

Each install option is declared once, on its RunOptions field (`option(...)`): its flag, help,
argparse kind, `install --help` group, whether the env's record keeps it and whether its value is
masked there. The parser flags (cli.flags), the options builder (cli.optionsbuilder), the record
(state.envrecord) and the change check (state.changes) are all derived from `declared()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from verl_bootstrap.profile.models import EnvSpec

__all__ = [
    "CONFIG_HELP",
    "Declared",
    "Option",
    "RunOptions",
    "SiteOptions",
    "declared",
    "option",
    "options_argv",
]

# value: one string; path: one path; number: a float; switch: on when given; repeat: repeatable;
# toggle: --NAME on, --no-NAME off (off given wins over the record, where a switch cannot say off)
Kind = Literal["value", "path", "number", "switch", "repeat", "toggle"]
# the heading an option is shown under in `install --help`
Group = Literal["where", "what", "sources", "behaviour"]


@dataclass(frozen=True)
class Option:
    """How one RunOptions field is given on the command line and kept in the env's record."""

    flags: tuple[str, ...] = ()  # its spellings; () for a field no flag sets (the site config)
    help: str = ""
    kind: Kind = "value"
    group: Group = "behaviour"
    recorded: bool = (
        True  # kept in the env's record (resumed from it, compared by the change check)
    )
    masked: bool = False  # credentials are masked before the record keeps it
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    exclusive: str = ""  # flags that share this name exclude each other (--locked | --frozen)
    on_plan: bool = True  # `plan` takes the flag too (--wait is for a run that waits)
    label: str = ""  # its name in the change check (default: the field's name, spaced)

    @property
    def dest(self) -> str:
        """Where argparse puts the flag's value (from its first spelling, as argparse does)."""
        return self.flags[0].lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Declared:
    """One declared option: its RunOptions field's name and default, and how it is given."""

    name: str
    default: Any
    spec: Option

    @property
    def label(self) -> str:
        return self.spec.label or self.name.replace("_", " ")

    def argv(self, value: Any) -> list[str]:
        """The flags that give this option `value`, as `install` parses them (none for a switch
        that is off or a value that is None; a toggle's False is its --no- spelling)."""
        flag, kind = self.spec.flags[0], self.spec.kind
        if kind in ("switch", "toggle"):
            off = f"--no-{flag.removeprefix('--')}" if kind == "toggle" and value is False else ""
            return [flag] if value else [off] if off else []
        if kind == "repeat":  # an index is a (name, url) pair, given as NAME=URL
            return [w for item in value for w in (flag, _word(item))]
        return [] if value is None else [flag, _word(value)]


def _word(value: Any) -> str:
    if isinstance(value, tuple):
        return "=".join(value)
    return f"{value:g}" if isinstance(value, float) else str(value)  # --wait 3600, not 3600.0


def option(default: Any, *flags: str, **spec: Any) -> Any:
    """A RunOptions field declared with its flag(s) and how it is recorded (see Option)."""
    return field(default=default, metadata={"option": Option(flags=flags, **spec)})


@dataclass(frozen=True)
class SiteOptions:
    """What the site config adds to a run (its named indexes travel in RunOptions.indexes).

    Each index field replaces pip's own setting of that name when set (None keeps pip's).
    """

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] | None = None
    find_links: tuple[str, ...] | None = None
    pytorch: tuple[tuple[str, str], ...] = ()  # (CUDA variant, URL of its PyTorch wheel index)
    environment: tuple[tuple[str, str | None], ...] = ()  # for every backend; None unsets
    notes: tuple[str, ...] = ()
    origin: str = ""  # the config file(s) these came from
    wheelhouse: str | None = None  # the lab wheelhouse folder (None: the tool home's)
    bundle_kernels: Path | None = None  # a bundle's kernel wheels: a wheelhouse searched first
    cuda_arch: tuple[str, ...] = ()  # archs a source build uses when no GPU is seen
    kernel_sources: tuple[str, ...] | None = None  # prebuilt kernel sources on, in this order
    lockfiles: str | None = None  # the lab's lockfiles: a folder or URL laid out as lockfiles/


_PROFILE_HELP = (
    "a shipped profile name or a YAML file (default: the one --prefix was made with, else the "
    "site config's defaults.profile)"
)
CONFIG_HELP = (
    "a site config file or URL, over $VERL_BOOTSTRAP_CONFIG, ~/.config/verl-bootstrap/config.yaml "
    "and /etc/verl-bootstrap/config.yaml"
)


@dataclass(frozen=True)
class RunOptions:
    """What the user asked for on the command line (after defaults); each option declared once."""

    profile: str = field(
        metadata={"option": Option(("--profile",), _PROFILE_HELP, group="what", metavar="NAME")}
    )
    prefix: Path = field(
        metadata={
            "option": Option(
                ("--prefix",),
                "where the env goes (default ~/.verl-bootstrap/envs/PROFILE)",
                kind="path",
                group="where",
                recorded=False,  # the record lives in the env at the prefix
            )
        }
    )
    backend: str | None = option(
        None,
        "--backend",
        help="env backend (default: the profile's)",
        choices=("conda", "venv"),
        group="where",
    )  # conda | venv; None: the profile's
    verl_source: str | None = option(
        None,
        "--verl-source",
        help="verl git URL or local repo (a mirror)",
        group="what",
        masked=True,
        label="verl source",
    )
    verl_ref: str | None = option(
        None, "--verl-ref", help="verl tag, branch or commit (default: the profile's)", group="what"
    )
    cuda: str = option(
        "auto",
        "--cuda",
        help="auto | cpu | cuXYZ (default auto: from the driver)",
        group="what",
        label="--cuda",
    )
    # (name, url) from --index and the site config
    indexes: tuple[tuple[str, str], ...] = option(
        (),
        "--index",
        kind="repeat",
        metavar="NAME=URL",
        group="sources",
        masked=True,
        help="point a named index elsewhere (repeatable; 'default' is the default index)",
    )
    channels: tuple[str, ...] = option(
        (),
        "--channel",
        kind="repeat",
        metavar="URL_OR_PATH",
        group="sources",
        masked=True,
        help="conda channel (repeatable)",
    )
    installer: str = option(
        "uv",
        "--installer",
        help="package installer (default uv)",
        choices=("uv", "pip"),
        group="where",
    )
    python: Path | None = option(
        None,
        "--python",
        kind="path",
        help="base interpreter for the venv backend: its path, or a version X.Y on this machine",
        group="where",
    )  # an interpreter to build the venv from
    conda_exe: str | None = option(
        None,
        "--conda-exe",
        help="use this conda/mamba/micromamba instead of py-rattler",
        group="where",
    )
    skip_checks: tuple[str, ...] = option(
        (),
        "--skip-check",
        kind="repeat",
        metavar="NAME",
        label="skipped checks",
        help="override one preflight check (recorded in the lockfile)",
    )
    require_gpu: bool = option(
        False,
        "--require-gpu",
        kind="switch",
        help="fail verification when no GPU smoke test can run",
    )
    train: str = option(
        "auto",
        "--train",
        choices=("auto", "sft", "rl", "none"),
        recorded=False,  # a verification choice of this run, not how the env is made
        help="the training step in the install's verify: auto (a GPU profile on a GPU host: one "
        "GRPO step, while it costs under a tenth of the install; a CPU env: none), sft, rl, none",
    )
    allow_unsupported_ref: bool = option(
        False,
        "--allow-unsupported-ref",
        kind="switch",
        group="what",
        help="use today's stack at a ref no stack covers",
    )
    guard_wait: float = option(
        0.0,
        "--wait",
        kind="number",
        metavar="SECONDS",
        recorded=False,  # how long this run waits changes nothing it builds
        on_plan=False,
        help="wait this long for another run's prefix lock",
    )
    offline: bool = option(
        False,
        "--offline",
        kind="switch",
        group="sources",
        help="install only from caches and local paths",
    )
    # also install the stages marked `option: tests` (verl's test tools)
    with_tests: bool = option(
        False,
        "--with-tests",
        kind="toggle",
        group="what",
        help="also install what verl's own test suite needs (the profile's test stages); "
        "--no-with-tests: no longer (an env keeps the choice it was made with)",
    )
    site: SiteOptions = SiteOptions()  # from the site config; CLI flags override it
    # install exactly a lockfile whose profile hash matches the profile
    locked: bool = option(
        False,
        "--locked",
        kind="switch",
        group="sources",
        exclusive="lock-mode",
        help="install exactly the profile's lockfile (refused when the profile changed since)",
    )
    # install a lockfile as it is (no profile-hash check)
    frozen: bool = option(
        False,
        "--frozen",
        kind="switch",
        group="sources",
        exclusive="lock-mode",
        help="install the lockfile as it is, even if stale",
    )
    # resolve even when a lockfile fits (by default the run installs the lockfile that fits)
    resolve: bool = option(
        False,
        "--resolve",
        kind="switch",
        group="sources",
        exclusive="lock-mode",
        help="resolve against today's index even when a lockfile fits (by default the lab's or "
        "the profile's lockfile is installed, hash-checked, when it fits this run)",
    )
    # the lockfile (default: lockfiles/PROFILE/VARIANT-PLATFORM)
    lockfile: Path | None = option(
        None,
        "--lockfile",
        kind="path",
        metavar="PATH",
        group="sources",
        help="the lockfile to install (implies --locked; default lockfiles/PROFILE/...)",
    )
    # the archs a kernel source build compiles for
    cuda_arch: tuple[str, ...] = option(
        (),
        "--cuda-arch",
        kind="repeat",
        metavar="CC",
        group="what",
        help="GPU architecture a kernel source build compiles for, e.g. 9.0 (repeatable; "
        "default: the GPUs seen here, else the site config's)",
    )
    # the site config passed with --config (a file or a URL)
    config: str | None = option(
        None, "--config", metavar="FILE_OR_URL", help=CONFIG_HELP, group="sources", masked=True
    )

    def backend_for(self, env: EnvSpec | None, recorded: str | None = None) -> str:
        """The env backend (see `choose_backend`)."""
        return choose_backend(self.backend, env, recorded)

    def channels_for(self, env: EnvSpec) -> tuple[str, ...]:
        """The conda channels: --channel, else the profile's."""
        return self.channels or tuple(env.channels)

    def to_argv(self) -> list[str]:
        """`install`'s flags that give these options back: --profile and --prefix, then every
        option that is not its default, in declaration order (parsing them with `install`'s
        parser gives these options again, on a host whose site config adds nothing). Words, not
        shell text: a caller that writes a shell line quotes them (shlex.join)."""
        given = {
            o.name: getattr(self, o.name)
            for o in declared(type(self))
            if o.spec.flags
            and (o.name in ("profile", "prefix") or getattr(self, o.name) != o.default)
        }
        return options_argv(given)


def options_argv(given: Mapping[str, Any]) -> list[str]:
    """`install`'s flags for the options in `given` (RunOptions field names), in declaration
    order: the one place an option becomes flags. RunOptions.to_argv renders a whole run's; a
    caller that holds only some options (the resume hint's prefix, onboard's lab defaults,
    cluster's node install) gives those alone and leaves the rest to `install`'s defaults."""
    options = {o.name: o for o in declared(RunOptions) if o.spec.flags}
    unknown = sorted(set(given) - set(options))
    if unknown:
        raise ValueError(f"not install options with a flag: {', '.join(unknown)}")
    return [w for name, o in options.items() if name in given for w in o.argv(given[name])]


DEFAULT_BACKEND = "conda"  # EnvSpec's default: a profile that names no backend


# The one rule for the env backend, taken by install, plan, lock, doctor and bundle alike
# (tests/test_choices.py counts its call sites): --backend, else what a lockfile or bundle being
# reused recorded, else the profile's; with no profile, the profiles' own default
def choose_backend(flag: str | None, env: EnvSpec | None, recorded: str | None = None) -> str:
    """The env backend a run builds with."""
    if flag:
        return flag
    if recorded:
        return recorded
    return env.backend if env is not None else DEFAULT_BACKEND


def declared(cls: type[RunOptions] | None = None) -> tuple[Declared, ...]:
    """Every field of `cls` (default RunOptions) declared as an option, in field order."""
    found = []
    for f in fields(cls or RunOptions):
        spec = f.metadata.get("option")
        if isinstance(spec, Option):
            default = None if f.default is MISSING else f.default
            found.append(Declared(f.name, default, spec))
    return tuple(found)
