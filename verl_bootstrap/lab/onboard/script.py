"""`onboard --emit-script`: a short POSIX shell script a lab can publish.

It installs verl-bootstrap into the user's space (a venv under ~/.local/share, no sudo, no
Docker): the very tool that emitted it, from its wheel published beside the script and checked
by sha256 (or, with `--tool`, a requirement the lab's index serves; the tool's own dependencies
come from the lab's index either way), links it into ~/.local/bin, then runs `verl-bootstrap
onboard` with the lab's config, and ends by saying the line that puts the tool on PATH when it
is not there. Credentials never go into it: a URL that needs one must name a variable
(`${LAB_TOKEN}`), which the user's shell fills in when the script runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_bootstrap.errors import InputError
from verl_bootstrap.lab.onboard.toolwheel import ToolWheel
from verl_bootstrap.paths import atomic_write
from verl_bootstrap.redact import secrets_in
from verl_bootstrap.siteconfig import LoadedSite, load_site
from verl_bootstrap.siteconfig.siteload import CONFIG_VARS

__all__ = ["LabScript", "lab_script", "onboarding_script", "write_script"]

_REFERENCE = re.compile(r"^\$(\{[A-Za-z_]\w*\}|[A-Za-z_]\w*)$")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
_DOLLAR = re.compile(r"\$(?!\{[A-Za-z_]\w*\}|[A-Za-z_])")

_BODY = r"""
set -f  # no globbing: URLs may hold '?' and '*'
say() { printf 'onboard: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" != 0 ] || say "running as root; the env is meant to belong to a normal user"

PY=
for candidate in ${VB_PYTHON:-} python3.12 python3.11 python3.10 python3; do
  command -v "$candidate" >/dev/null 2>&1 || continue
  if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    PY=$candidate; break
  fi
done
[ -n "$PY" ] || die "no Python >= 3.10 found; set VB_PYTHON to one (it stays in user space)"

TOOL="$VB_HOME/tool"
HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)  # where the lab put this script and its wheel
WANT=${VB_TOOL:-"sha256:$VB_WHEEL_SHA256"}  # what the tool venv must hold
pip_install() {
  args="--disable-pip-version-check --quiet"
  [ -z "$VB_INDEX_URL" ] || args="$args --index-url $VB_INDEX_URL"
  for url in $VB_EXTRA_INDEX_URLS; do args="$args --extra-index-url $url"; done
  for url in $VB_FIND_LINKS; do args="$args --find-links $url"; done
  # shellcheck disable=SC2086  # $args is a list of flags
  "$TOOL/bin/python" -m pip install $args "$@"
}
sha256() {
  "$PY" - "$1" <<'EOF'
import hashlib, sys
sys.stdout.write(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())
EOF
}
checked_wheel() {  # the wheel beside this script, copied into VB_HOME and its sha256 checked
  [ -n "$VB_WHEEL" ] || die "this script names no wheel: set VB_TOOL to the tool's requirement"
  [ -f "$HERE/$VB_WHEEL" ] || die "the tool's wheel $VB_WHEEL is not beside this script" \
    "(in $HERE): run the script from the folder the lab published it in, or set VB_TOOL to" \
    "a requirement your index serves (VB_TOOL=verl-bootstrap)"
  mkdir -p "$VB_HOME"
  cp "$HERE/$VB_WHEEL" "$VB_HOME/$VB_WHEEL" || die "cannot copy $HERE/$VB_WHEEL into $VB_HOME"
  got=$(sha256 "$VB_HOME/$VB_WHEEL")
  [ "$got" = "$VB_WHEEL_SHA256" ] || { rm -f "$VB_HOME/$VB_WHEEL"; die "$HERE/$VB_WHEEL is not" \
    "the wheel this script was made with (sha256 $got, not $VB_WHEEL_SHA256): ask the lab to" \
    "run \`verl-bootstrap onboard --emit-script\` again"; }
}
if [ "$(cat "$TOOL/.installed" 2>/dev/null || true)" != "$WANT" ] || [ -n "${VB_UPGRADE:-}" ]; then
  [ -n "$VB_TOOL" ] || checked_wheel  # before anything is made
  "$PY" -m venv "$TOOL" ||
    die "$PY cannot make a venv (Debian/Ubuntu package it apart); set VB_PYTHON to another"
  if [ -n "$VB_TOOL" ]; then
    say "installing $VB_TOOL into $TOOL"
    pip_install "$VB_TOOL" || die "could not install $VB_TOOL"
  else
    say "installing $VB_WHEEL (sha256 checked) into $TOOL"
    # this very wheel, even over an install of the same version, then what it requires
    pip_install --force-reinstall --no-deps "$VB_HOME/$VB_WHEEL" &&
      pip_install "$VB_HOME/$VB_WHEEL" || die "could not install $VB_WHEEL"
    rm -f "$VB_HOME/$VB_WHEEL"
  fi
  printf '%s\n' "$WANT" >"$TOOL/.installed"
fi

BIN=${XDG_BIN_HOME:-"$HOME/.local/bin"}
LINK="$BIN/verl-bootstrap"
mkdir -p "$BIN"
if [ ! -e "$LINK" ] && [ ! -L "$LINK" ]; then
  ln -s "$TOOL/bin/verl-bootstrap" "$LINK"
elif [ "$(readlink "$LINK")" = "$TOOL/bin/verl-bootstrap" ]; then
  : # this script's link, from an earlier run
else
  say "left $LINK as it is (not this script's link); the lab's tool is $TOOL/bin/verl-bootstrap"
  LINK="$TOOL/bin/verl-bootstrap"
fi
status=0
"$TOOL/bin/verl-bootstrap" onboard --config "$VB_CONFIG" "$@" || status=$?
found=$(command -v verl-bootstrap 2>/dev/null || true)
if [ -z "$found" ]; then
  say "verl-bootstrap is in $BIN, which is not on your PATH; this line puts it there (add it" \
    "to your shell rc to keep it):"
  printf 'export PATH="%s:$PATH"\n' "$BIN" >&2
elif [ "$found" != "$LINK" ]; then
  say "the verl-bootstrap first on your PATH is $found; the lab's is $LINK"
fi
exit "$status"
"""


def _shell_string(value: str) -> str:
    """`value` in double quotes: variable references expand when the script runs, nothing else."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
    return '"' + _DOLLAR.sub(r"\\$", escaped) + '"'


def _literal(value: str) -> str:
    """`value` in single quotes: verl-bootstrap fills in its variables itself, so the token
    never shows in the process list."""
    return "'" + value.replace("'", "'\\''") + "'"


def _public(value: str, what: str) -> str:
    """Refuse a literal credential: the script is meant to be published."""
    # the one rule of what is a credential (verl_bootstrap.redact): userinfo, query parameters
    # named like a secret (signed URLs' sig, X-Amz-Signature, ...), tokens known by their shape
    if any(not _REFERENCE.match(s) for s in secrets_in(value)):
        raise InputError(
            f"{what} holds a credential, and a published script must not",
            hint="keep the login in each user's ~/.netrc (the tool sends it to that host only), "
            "or write it as a variable in the lab config, e.g. "
            "https://user:${LAB_TOKEN}@mirror/simple; users export LAB_TOKEN before running",
        )
    return value


def _published(data: Any, where: str = "") -> None:
    """Every value of the lab config the script points users at (lockfiles, wheelhouse, every
    mirror, defaults): the config is published with the script, so none may hold a credential."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            _published(value, f"{where}.{key}" if where else str(key))
    elif isinstance(data, (list, tuple)):
        for value in data:
            _published(value, where)
    elif isinstance(data, str):
        _public(data, where)


def _pick(raw: Mapping[str, Any], merged: Mapping[str, Any], *keys: str) -> Any:
    """The --config file's own value (variables unexpanded) where it has one, else the merged."""
    for source in (raw, merged):
        value: Any = source
        for key in keys:
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is not None:
            if source is raw and "$" not in str(value):
                return _pick({}, merged, *keys)
            return value
    return None


def _words(value: Any) -> str:
    return " ".join(value) if isinstance(value, (list, tuple)) else (value or "")


def _settings(site: LoadedSite, config: str, tool: str) -> list[tuple[str, str]]:
    """The settings a user may set beforehand (VB_TOOL: "" installs the wheel beside it)."""
    merged = site.config.model_dump(mode="json")
    raw = site.raw

    def pick(*keys: str) -> str:
        return _public(_words(_pick(raw, merged, *keys)), ".".join(keys))

    return [
        ("VB_CONFIG", _public(config, "the config location")),
        ("VB_TOOL", _public(tool, "--tool")),
        ("VB_INDEX_URL", pick("mirrors", "pypi", "index_url")),
        ("VB_EXTRA_INDEX_URLS", pick("mirrors", "pypi", "extra_index_urls")),
        ("VB_FIND_LINKS", pick("mirrors", "pypi", "find_links")),
    ]


def _network(site: LoadedSite) -> list[str]:
    """Exports so that pip reaches the mirror the way the lab config says."""
    merged = site.config.model_dump(mode="json")
    lines = []
    for name, keys in (
        ("HTTP_PROXY", ("network", "proxy", "http")),
        ("HTTPS_PROXY", ("network", "proxy", "https")),
        ("NO_PROXY", ("network", "proxy", "no_proxy")),
        ("PIP_CERT", ("network", "ca_bundle")),
    ):
        value = _pick(site.raw, merged, *keys)
        if value is not None:
            text = ",".join(value) if isinstance(value, list) else str(value)
            lines.append(f"export {name}={_shell_string(_public(text, '.'.join(keys)))}")
    return lines


def onboarding_script(site: LoadedSite, *, config: str, tool: ToolWheel | str) -> str:
    """The script's text: settings from the lab config at the top, the same body for every lab.
    `tool`: the tool's own wheel, published beside the script, or a requirement the lab's index
    serves (`--tool`)."""
    _published(site.raw)
    header = [
        "#!/bin/sh",
        "# Onboarding to the lab's verl env: installs verl-bootstrap into your user space (no",
        "# sudo, no Docker), then builds, verifies and activates the lab's env. Run it as you:",
        "#   sh onboard.sh [--shell-init] [other `verl-bootstrap onboard` flags]",
        "# Generated by `verl-bootstrap onboard --emit-script`; every VB_* but the wheel's can be",
        "# set beforehand (VB_TOOL=REQUIREMENT: the tool from your index, not the wheel here).",
        "set -eu",
    ]
    wheel = tool if isinstance(tool, ToolWheel) else ToolWheel("", "")
    requirement = "" if isinstance(tool, ToolWheel) else tool
    settings = [
        f"{name}=${{{name}-{_literal(value) if name == 'VB_CONFIG' else _shell_string(value)}}}"
        for name, value in _settings(site, config, requirement)
    ]
    pinned = [f"VB_WHEEL={_literal(wheel.name)}", f"VB_WHEEL_SHA256={_literal(wheel.sha256)}"]
    home = 'VB_HOME=${VB_HOME:-"${XDG_DATA_HOME:-$HOME/.local/share}/verl-bootstrap"}'
    lines = [*header, *settings, *pinned, home, *_network(site), *_variables(site)]
    return "\n".join(lines) + "\n" + _BODY.lstrip("\n")


def _variables(site: LoadedSite) -> list[str]:
    """The variables the published config names, which a config fetched by URL may read only
    when the user lets it ($VERL_BOOTSTRAP_CONFIG_VARS): running the lab's script says yes."""
    names = sorted({braced or bare for braced, bare in _VARIABLE.findall(repr(site.raw))})
    if not names:
        return []
    return [f"export {CONFIG_VARS}=${{{CONFIG_VARS}-{','.join(names)}}}"]


@dataclass(frozen=True)
class LabScript:
    """A lab config, checked for publishing, and the location the script names it by."""

    site: LoadedSite
    location: str

    def text(self, tool: ToolWheel | str) -> str:
        """The script, installing `tool` (see onboarding_script)."""
        return onboarding_script(self.site, config=self.location, tool=tool)


def lab_script(config: str, *, publish_as: str | None) -> LabScript:
    """The lab config at `config`, named by `publish_as` (where the lab publishes it), else by
    its own location (a file's made absolute); refused now if it could not be published."""
    location = _public(publish_as or _absolute(config), "the config location")
    site = load_site(config)
    _published(site.raw)
    return LabScript(site, location)


def _absolute(location: str) -> str:
    return location if "://" in location else str(Path(location).expanduser().absolute())


def write_script(target: Path, script: str) -> None:
    """Write the script where the lab publishes it from, executable."""
    atomic_write(target, script)
    target.chmod(0o755)
