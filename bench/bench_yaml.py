"""The bounded YAML reader against PyYAML's own safe loader: what the bounds cost on real files,
and how fast an alias bomb is refused. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_yaml.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from verl_bootstrap.errors import InputError  # noqa: E402
from verl_bootstrap.safety.yamlfile import load_yaml  # noqa: E402

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def best_of(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bomb(levels: int) -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "schema_version: 1\n" + "\n".join(lines) + "\n"


def refuse(path: Path) -> None:
    try:
        load_yaml(path, what="profile")
    except InputError:
        return
    raise AssertionError("the bomb was accepted")


def main() -> None:
    files = sorted((ROOT / "lockfiles").glob("*/*.yaml")) + sorted(
        (ROOT / "profiles").glob("*.yaml")
    )
    bounded = best_of(lambda: [load_yaml(f, what="file") for f in files])
    plain = best_of(lambda: [yaml.load(f.read_text(), Loader=_LOADER) for f in files])
    print(
        f"{len(files)} shipped lockfiles and profiles: bounded {bounded * 1000:.0f} ms, "
        f"PyYAML safe loader {plain * 1000:.0f} ms ({bounded / plain:.2f}x)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bomb.yaml"
        path.write_text(bomb(12))
        size = len(path.read_bytes())
        print(
            f"alias bomb ({size} bytes, 9^12 values expanded): refused in "
            f"{best_of(lambda: refuse(path)) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
