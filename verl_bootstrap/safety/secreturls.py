"""URLs whose secret is not userinfo (`?token=...`, a token in the path) leave a child's argv too.

Such a URL cannot be split into a clean URL and a login (verl_bootstrap.safety.credentials), so the
whole URL travels in the child's environment, where each tool documents it reads it:
- uv takes its index flags from UV_DEFAULT_INDEX / UV_INDEX_URL and UV_EXTRA_INDEX_URL (a
  space-separated list) and UV_FIND_LINKS (comma-separated), pip from PIP_INDEX_URL,
  PIP_EXTRA_INDEX_URL and PIP_FIND_LINKS. When one index URL of a
  kind holds a secret, every URL of that kind moves (a flag on the command line would replace
  the variable, not add to it);
- git is given the clean URL (its query left out) on its command line, and a
  `url.<secret URL>.insteadOf <clean URL>` setting through GIT_CONFIG_COUNT/KEY/VALUE, so it
  fetches the secret URL and records only the clean one in `.git/config`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from verl_bootstrap.redact import redact

__all__ = ["has_secret", "move_secret_urls"]

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
# flag -> the variables that carry it, per tool (uv: UV_DEFAULT_INDEX beats UV_INDEX_URL, so a
# default index sets both, and a user's own value of either cannot win over the run's)
_UV_FLAGS = {
    "--default-index": ("UV_DEFAULT_INDEX", "UV_INDEX_URL"),
    "--index-url": ("UV_DEFAULT_INDEX", "UV_INDEX_URL"),
    "--extra-index-url": ("UV_EXTRA_INDEX_URL",),
    "--find-links": ("UV_FIND_LINKS",),
    "-f": ("UV_FIND_LINKS",),
}
_PIP_FLAGS = {
    "--index-url": ("PIP_INDEX_URL",),
    "-i": ("PIP_INDEX_URL",),
    "--extra-index-url": ("PIP_EXTRA_INDEX_URL",),
    "--find-links": ("PIP_FIND_LINKS",),
    "-f": ("PIP_FIND_LINKS",),
}
# variables that hold a list, and how each tool splits it (uv's find-links: commas, checked on
# uv 0.13; the rest: whitespace)
_LIST_SEPARATOR = {
    "UV_EXTRA_INDEX_URL": " ",
    "UV_FIND_LINKS": ",",
    "PIP_EXTRA_INDEX_URL": " ",
    "PIP_FIND_LINKS": " ",
}


def has_secret(url: str) -> bool:
    """`url` carries a secret besides its userinfo (that one travels in a netrc instead)."""
    bare = _USERINFO.sub(r"\1", url, count=1)
    return redact(bare) != bare


def move_secret_urls(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[list[str], list[tuple[str, str]], dict[str, str]]:
    """(argv without secret-bearing URLs, git settings to add, variables to add)."""
    flags = _flags_of(argv)
    if flags is not None:
        args, env = _move_flags(list(argv), flags)
        return args, [], env
    if argv and Path(argv[0]).name == "git":
        args, settings = _git_aliases(argv)
        return args, settings, {}
    return list(argv), [], {}


def _flags_of(argv: Sequence[str]) -> Mapping[str, tuple[str, ...]] | None:
    if argv and Path(argv[0]).name == "uv":
        return _UV_FLAGS
    if len(argv) > 2 and argv[1] == "-m" and argv[2] == "pip":
        return _PIP_FLAGS
    return None


def _move_flags(
    argv: list[str], flags: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], dict[str, str]]:
    """Every URL of each flag kind that has a secret among its URLs, moved to its variables."""
    pairs = _flag_values(argv, flags)
    secret_kinds = {flags[f] for _, f, url in pairs if has_secret(url)}
    if not secret_kinds:
        return argv, {}
    env: dict[str, str] = {}
    drop: set[int] = set()
    for index, flag, url in pairs:
        names = flags[flag]
        if names not in secret_kinds:
            continue
        for name in names:
            sep = _LIST_SEPARATOR.get(name)
            env[name] = f"{env[name]}{sep}{url}" if sep and name in env else url
        drop.update((index, index + 1) if argv[index] == flag else (index,))
    return [a for i, a in enumerate(argv) if i not in drop], env


def _flag_values(
    argv: Sequence[str], flags: Mapping[str, tuple[str, ...]]
) -> list[tuple[int, str, str]]:
    """(position, flag, URL) of each index flag, as `--flag URL` or `--flag=URL`."""
    found = []
    for index, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if arg in flags and index + 1 < len(argv):
            found.append((index, arg, argv[index + 1]))
        elif eq and name in flags:
            found.append((index, name, value))
    return found


def _git_aliases(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """git's argv with each secret query URL replaced by its clean form, and the settings that
    make git fetch the real one."""
    out, settings = [], []
    for arg in argv:
        clean = arg.split("?", 1)[0]
        if "://" in arg and has_secret(arg) and not has_secret(clean) and clean != arg:
            settings.append((f"url.{arg}.insteadOf", clean))
            out.append(clean)
        else:
            out.append(arg)
    return out, settings
