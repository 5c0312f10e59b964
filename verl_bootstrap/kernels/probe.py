"""Ask an env's interpreter for its build key, and load its compiled modules (probe scripts)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.errors import StepFailed
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.paths import PROBES
from verl_bootstrap.verify import bytecode
from verl_bootstrap.verify.env import needs_driver

__all__ = ["check_loads", "load_failures", "probe_key", "undefined_symbol"]

_UNDEFINED = re.compile(r"undefined symbol:?\s*(\S+)")


def _ask(python: Path, script: str, *args: str) -> dict[str, object]:
    done = proc.capture([str(python), "-I", str(PROBES / script), *args], timeout=300)
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        assert isinstance(answer, dict)
    except (IndexError, ValueError, AssertionError):
        tail = (done.stderr or done.stdout).strip()[-400:]
        raise StepFailed(f"the {script} probe did not answer in {python}: {tail}") from None
    return answer


def probe_key(python: Path) -> BuildKey:
    """The env's key: torch (if installed), its CUDA and ABI, the Python tag, the platform."""
    return BuildKey.from_mapping(_ask(python, "build_key.py"))


def load_failures(python: Path, modules: tuple[str, ...]) -> dict[str, str]:
    """module -> error, for each module that does not load in the env."""
    if not modules:
        return {}
    answer = _ask(python, "load_modules.py", *modules)
    return {name: str(error) for name, error in answer.items() if error is not None}


def undefined_symbol(error: str) -> str | None:
    """The symbol an `undefined symbol` import error names, if that is what it is."""
    match = _UNDEFINED.search(error)
    return match.group(1) if match else None


def check_loads(
    python: Path,
    modules: tuple[str, ...],
    built_for: BuildKey,
    key: BuildKey,
    *,
    gpu_present: bool,
    note: Callable[[str], None],
) -> None:
    """The stage's compiled modules load in the env; an `undefined symbol` names both keys."""
    # loading them imports torch: its first import in the env, cold unless the store has its pycs
    if modules:
        restored = bytecode.restore(python, python.parents[1], None)
        note(f"bytecode store: {restored.get('restored', 0)} compiled modules restored")
    for module, error in load_failures(python, modules).items():
        if not gpu_present and needs_driver(error):
            note(f"kernel {module}: not loaded here, it needs the NVIDIA driver ({error})")
            continue
        symbol = undefined_symbol(error)
        if symbol is not None:
            raise StepFailed(
                f"{module} does not load: undefined symbol {symbol}. The wheel was built for "
                f"{built_for.describe()}; this env has {key.describe()}",
                hint="remove that wheel from the wheelhouse (or state its real key) and re-run",
            )
        raise StepFailed(f"{module} does not load after the stage: {error}")
