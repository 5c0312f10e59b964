"""The user's own activation file, and the block that sources it from their shell rc.

The rc block sits between markers, so writing it again replaces it (idempotent) and a user can
remove it by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.activation import activation_script
from verl_bootstrap.paths import atomic_write, tool_home
from verl_bootstrap.safety.shellquote import quote

__all__ = [
    "BEGIN",
    "END",
    "default_shell",
    "planned_files",
    "rc_file",
    "user_activation",
    "write_rc_block",
]

BEGIN = "# >>> verl-bootstrap >>>"
END = "# <<< verl-bootstrap <<<"


def default_shell(environ: Mapping[str, str]) -> str:
    """The user's login shell when it is one we support, else bash."""
    name = Path(environ.get("SHELL", "")).name
    return name if name in ("bash", "zsh", "fish") else "bash"


def user_activation(prefix: Path, home: Path) -> dict[str, Path]:
    """Write `<home>/activate` (bash, zsh, sh) and `<home>/activate.fish` for `prefix`'s env."""
    written = {}
    for shell, name in (("bash", "activate"), ("fish", "activate.fish")):
        path = home / name
        atomic_write(path, activation_script(prefix, shell))
        written[shell] = path
    return written


def planned_files(
    shells: tuple[str, ...], *, shell_init: bool, environ: Mapping[str, str]
) -> tuple[list[Path], list[Path]]:
    """The activation files onboarding writes in the tool home (user_activation's), and the
    shell rc files it adds the sourcing line to (with `shell_init` only)."""
    home = tool_home(environ)
    files = [home / "activate", home / "activate.fish"]
    user = Path(environ.get("HOME") or Path.home())
    return files, [rc_file(shell, environ, user) for shell in shells] if shell_init else []


def rc_file(shell: str, environ: Mapping[str, str], home: Path) -> Path:
    """The file a shell reads at start-up."""
    if shell == "zsh":
        return Path(environ.get("ZDOTDIR") or home) / ".zshrc"
    if shell == "fish":
        config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
        return config / "fish" / "config.fish"
    return home / ".bashrc"


def _block(shell: str, activation: Path) -> str:
    quoted = quote(str(activation), shell, "the activation file's path")
    line = (
        f"if test -f {quoted}; source {quoted}; end"
        if shell == "fish"
        else f"if [ -f {quoted} ]; then . {quoted}; fi"
    )
    why = "# Added by `verl-bootstrap onboard --shell-init`; delete this block to stop it."
    return f"{BEGIN}\n{why}\n{line}\n{END}\n"


def _link_target(rc: Path) -> Path:
    """The file a symlinked rc points at (followed to its end); `rc` itself otherwise."""
    if not rc.is_symlink():
        return rc
    target = rc.resolve()  # strict=False: a dangling link's target is created, as a shell would
    if target.exists() and not target.is_file():
        raise InputError(
            f"{rc} links to {target}, which is not a file",
            hint=f"fix the link, or add the block to {target} yourself",
        )
    return target


def write_rc_block(rc: Path, shell: str, activation: Path) -> bool:
    """Put the block into `rc` (replacing an older one); False when it was already there.

    A symlinked rc file (dotfiles kept in a repository) stays a link: its target is edited."""
    rc = _link_target(rc)
    text = rc.read_text(encoding="utf-8") if rc.exists() else ""
    block = _block(shell, activation)
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        new = head + block.rstrip("\n") + tail
    else:
        new = text + ("\n" if text and not text.endswith("\n") else "") + block
    if new == text:
        return False
    mode = rc.stat().st_mode & 0o777 if rc.exists() else 0o644
    atomic_write(rc, new)
    rc.chmod(mode)
    return True
