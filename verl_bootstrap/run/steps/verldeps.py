"""The verl-deps stage: verl's own requirements and extras, against its editable install.

install-verl has already installed verl's checkout into the env, editable. This stage asks the
resolver for `verl[extras]` by name, pinned to the version installed. The resolver then reads
the extras from the installed metadata. Asking for `-e checkout[extras]` instead would build
verl's metadata and its editable wheel a second time (about 2 s of every run). The installed
checkout must stay as it is: the pin and the check after the stage make sure of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from verl_bootstrap.errors import StepFailed
from verl_bootstrap.installer.envs.inventory import Dist, editable_path

__all__ = ["editable_verl", "verl_pin", "verl_requirement"]

_REINSTALL = "run verl-bootstrap again: install-verl puts the checkout back"


def verl_requirement(extras: tuple[str, ...]) -> str:
    """`verl[a,b]`: verl by name, so its installed metadata gives the extras."""
    return f"verl[{','.join(extras)}]" if extras else "verl"


def verl_pin(dists: Mapping[str, Dist], prefix: Path, checkout: Path) -> str:
    """`verl==<version>` of the editable install, the stage's constraint: no index build of
    the same name (a newer release, or this one) can replace the checkout."""
    return f"verl=={editable_verl(dists, prefix, checkout).version}"


def editable_verl(dists: Mapping[str, Dist], prefix: Path, checkout: Path) -> Dist:
    """verl among the env's `dists`, checked to be the editable install of its checkout."""
    dist = dists.get("verl")
    if dist is None:
        raise StepFailed(f"verl is not installed in {prefix}", hint=_REINSTALL)
    found = editable_path(dist.direct_url)
    if found is None or found.resolve() != checkout.resolve():
        where = f"editable from {found}" if found else "not an editable install"
        raise StepFailed(
            f"verl {dist.version} in {prefix} is {where}, not its checkout {checkout}",
            hint=_REINSTALL,
        )
    return dist
