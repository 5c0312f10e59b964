"""The package's house rules, checked on its source: no import circles, a short top level, and
every import deferred into a function says why."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "verl_bootstrap"
TOP_LEVEL_LIMIT = 12
# modules that --help loads: their library imports are deferred for start-up (see pyproject)
STARTUP = {"__init__", "flags", "parse", "options", "install", "doctor", "lock", "site", "cluster",
           "envs", "bundle", "verltests", "lockinput"}  # fmt: skip


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "probes" in path.parts:  # scripts run inside target envs, not modules of the tool
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if path.name == "__init__.py" else parts)] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Every module each module imports from the package, deferred imports included."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                target = target if target in modules else node.module
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as a path of module names, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_package_has_no_import_circles() -> None:
    assert _cycle(_imports(_modules())) is None


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_top_level_stays_short() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_LIMIT, top


def test_every_deferred_import_says_why() -> None:
    bare = []
    for path in PACKAGE.rglob("*.py"):
        if "probes" in path.parts or (path.parent.name == "cli" and path.stem in STARTUP):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"# noqa: PLC0415\s*$", line):
                bare.append(f"{path.relative_to(PACKAGE.parent)}:{number}")
    assert not bare, "deferred imports without a reason: " + ", ".join(bare)


def test_only_the_cli_output_module_prints() -> None:
    printing = [
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if "probes" not in path.parts
        and path != PACKAGE / "cli" / "output.py"
        and re.search(r"^\s*print\(", path.read_text(encoding="utf-8"), re.M)
    ]
    assert not printing
