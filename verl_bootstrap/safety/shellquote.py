"""Values written into generated shell code are quoted for that shell, or refused.

Every generated script (activation files, the rc block, the onboarding script, batch files) is
inert: a value becomes one word of data, never code. A line break or other control character is
refused outright: no quoting survives every context (a comment line, a #SBATCH line).
"""

from __future__ import annotations

import re
import shlex

from verl_bootstrap.errors import InputError

__all__ = ["one_line", "quote", "sbatch_value"]

_SBATCH = re.compile(r"^[A-Za-z0-9_.,:=+@%/-]+$")


def one_line(value: str, what: str) -> str:
    """`value` when it holds no line break or control character; else an InputError."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InputError(
            f"{what} {value!r} holds a line break or control character; it cannot go into a "
            "generated shell script",
            hint="choose a value without control characters",
        )
    return value


def quote(value: str, shell: str, what: str = "value") -> str:
    """`value` as one literal word of `shell` (bash, zsh, sh or fish)."""
    one_line(value, what)
    if shell == "fish":
        # in fish's single quotes only \\ and \' are escapes; everything else is literal
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return shlex.quote(value)


def sbatch_value(value: str, what: str) -> str:
    """A value for a `#SBATCH --flag=value` line: Slurm reads it unquoted; its shape is checked."""
    if not _SBATCH.fullmatch(value):
        raise InputError(
            f"{what} {value!r} cannot go on a #SBATCH line",
            hint="letters, digits and . , : = + @ % / _ - only",
        )
    return value
