"""The tool's own wheel, published beside the onboarding script: what the script installs.

No lab's index serves verl-bootstrap, so the script installs the very tool that emitted it: its
wheel (built from its source tree, or packed again from its installed files, as a bundle carries
it) is written into the script's folder, and the script checks its sha256 before installing it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import __version__
from verl_bootstrap.paths import atomic_copy, file_sha256

__all__ = ["ToolWheel", "planned_wheel", "publish_wheel"]


@dataclass(frozen=True)
class ToolWheel:
    """The wheel's file name (in the script's folder) and its sha256."""

    name: str
    sha256: str


def planned_wheel() -> str:
    """The file name the tool's wheel gets (for a dry run, which builds nothing)."""
    return f"verl_bootstrap-{__version__}-py3-none-any.whl"


def publish_wheel(folder: Path) -> ToolWheel:
    """Build the running tool's wheel and write it into `folder` (readable by the lab)."""
    # loaded only here: the bundle's builder pulls in the installer, which onboarding runs need
    from verl_bootstrap.lock.bundle.bundlesources import build_tool_wheel  # noqa: PLC0415 - see above

    with tempfile.TemporaryDirectory(prefix="verl-bootstrap-wheel-") as work:
        built = build_tool_wheel(Path(work))
        atomic_copy(built, folder / built.name, 0o644)
        return ToolWheel(built.name, file_sha256(built))
