"""The verl-deps stage: verl's own requirements and extras, against its editable install.

install-verl has already installed verl's checkout into the env, editable. This stage asks the
resolver for `verl[extras]` by name, pinned to the version installed. The resolver then reads
the extras from the installed metadata. Asking for `-e checkout[extras]` instead would build
verl's metadata and its editable wheel a second time (about 2 s of every run). The installed
checkout must stay as it is: the pin and the check after the stage make sure of it.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from installer.envs.inventory import Dist, installed
from installer.errors import StepFailed

__all__ = ["check_verl_editable", "verl_pin", "verl_requirement"]

_REINSTALL = "run verl-bootstrap again: install-verl puts the checkout back"


def verl_requirement(extras: tuple[str, ...]) -> str:
    """`verl[a,b]`: verl by name, so its installed metadata gives the extras."""
    return f"verl[{','.join(extras)}]" if extras else "verl"


def verl_pin(prefix: Path, checkout: Path) -> str:
    """`verl==<version>` of the editable install, the stage's constraint: no index build of
    the same name (a newer release, or this one) can replace the checkout."""
    return f"verl=={_editable_verl(prefix, checkout).version}"


def check_verl_editable(prefix: Path, checkout: Path) -> None:
    """After the stage: verl is still the editable install of its checkout."""
    _editable_verl(prefix, checkout)


def _editable_verl(prefix: Path, checkout: Path) -> Dist:
    dist = installed(prefix).get("verl")
    if dist is None:
        raise StepFailed(f"verl is not installed in {prefix}", hint=_REINSTALL)
    found = editable_path(dist)
    if found is None or found.resolve() != checkout.resolve():
        where = f"editable from {found}" if found else "not an editable install"
        raise StepFailed(
            f"verl {dist.version} in {prefix} is {where}, not its checkout {checkout}",
            hint=_REINSTALL,
        )
    return dist


def editable_path(dist: Dist) -> Path | None:
    """The folder an editable install points at (PEP 610 direct_url.json), or None."""
    info = dist.direct_url or {}
    dir_info = info.get("dir_info")
    if not (isinstance(dir_info, dict) and dir_info.get("editable")):
        return None
    url = urlparse(str(info.get("url", "")))
    return Path(unquote(url.path)) if url.scheme == "file" else None
