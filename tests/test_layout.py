"""The package's house rules, checked on its source: no import circles between modules, no circle
of any length between top-level packages, step kinds only in steps/, a short top level, every
import deferred into a function says why, and docs/layout.md names every package and module."""

from __future__ import annotations

import ast
import itertools
import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "verl_bootstrap"
TOP_LEVEL_LIMIT = 12
# the kernel flow passes one context object (KernelJob, KernelQuery, a route), not 8-10 values
PARAMETER_LIMIT = 6
# (lock/making/kernelwheels writes a lock's kernel wheels: kernel code outside kernels/)
NARROW_FILES = ("kernels/*.py", "lock/installing/*.py", "lock/making/kernelwheels.py")
# modules that --help loads: their library imports are deferred for start-up (see pyproject): the
# parser's, and every command module (cli/commands/, one loaded per run)
STARTUP = {"__init__", "flags", "parse", "optionsbuilder"}


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
            for target in _targets(node, modules):
                if target != name:
                    graph[name].add(target)
    return graph


def _targets(node: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The package's modules one import statement names (`import a.b` and `from a import b`)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
        return set()
    found = set()
    for alias in node.names:
        target = f"{node.module}.{alias.name}"
        target = target if target in modules else node.module
        if target in modules:
            found.add(target)
    return found


def _package(module: str) -> str:
    """The top-level subpackage (or module) of the package a module belongs to."""
    return module.split(".")[1] if "." in module else module


def _package_pairs(graph: dict[str, set[str]]) -> list[str]:
    """Each pair of top-level packages that import each other, with one import each way."""
    edges: dict[tuple[str, str], str] = {}
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            pair = (_package(source), _package(target))
            if pair[0] != pair[1]:
                edges.setdefault(pair, f"{source} -> {target}")
    return [
        f"{a} <-> {b} ({edges[(a, b)]}; {edges[(b, a)]})"
        for (a, b) in sorted(edges)
        if a < b and (b, a) in edges
    ]


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which top-level packages (and modules) each one imports, deferred imports included."""
    packages: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        packages[_package(source)] |= {_package(t) for t in targets} - {_package(source)}
    return packages


def _package_loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (each one loop or more), with
    one import of each edge inside them, so a failure says which import climbs back up."""
    packages = _package_graph(graph)
    loops = [sorted(c) for c in _components(packages) if len(c) > 1]
    return [[*comp, *_edges_within(graph, set(comp))] for comp in sorted(loops)]


def _edges_within(graph: dict[str, set[str]], packages: set[str]) -> list[str]:
    edges: dict[tuple[str, str], str] = {}
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            pair = (_package(source), _package(target))
            if pair[0] != pair[1] and set(pair) <= packages:
                edges.setdefault(pair, f"{source} -> {target}")
    return [edges[pair] for pair in sorted(edges)]


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Kosaraju: finish order, then the reversed graph)."""
    nodes = set(graph) | {t for targets in graph.values() for t in targets}
    order: list[str] = []
    seen: set[str] = set()
    for node in sorted(nodes):
        _finish(graph, node, seen, order)
    reverse: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            reverse[target].add(source)
    seen.clear()
    components = []
    for node in reversed(order):
        if node not in seen:
            found: list[str] = []
            _finish(reverse, node, seen, found)
            components.append(set(found))
    return components


def _finish(graph: dict[str, set[str]], start: str, seen: set[str], order: list[str]) -> None:
    """Append every node reached from `start` to `order` once it is finished (iterative DFS)."""
    if start in seen:
        return
    seen.add(start)
    stack = [(start, iter(sorted(graph.get(start, ()))))]
    while stack:
        node, rest = stack[-1]
        nxt = next((n for n in rest if n not in seen), None)
        if nxt is None:
            stack.pop()
            order.append(node)
        else:
            seen.add(nxt)
            stack.append((nxt, iter(sorted(graph.get(nxt, ())))))


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


def test_no_two_packages_import_each_other() -> None:
    assert _package_pairs(_imports(_modules())) == []


def test_the_pair_finder_finds_packages_that_import_each_other() -> None:
    graph = {"p.a.x": {"p.b.y"}, "p.b.z": {"p.a.w"}, "p.c": {"p.a.x"}}
    assert _package_pairs(graph) == ["a <-> b (p.a.x -> p.b.y; p.b.z -> p.a.w)"]
    assert _package_pairs({"p.a.x": {"p.b.y"}, "p.a.w": {"p.b.z"}}) == []


def test_no_loop_of_any_length_between_packages() -> None:
    # a pair is a loop of two; a longer one (a -> b -> c -> a) climbs back up a layer just as well
    assert _package_loops(_imports(_modules())) == []


def test_the_loop_finder_finds_a_loop_of_packages() -> None:
    graph = {"p.a.x": {"p.b.y"}, "p.b.y": {"p.c.z"}, "p.c.z": {"p.a.w"}, "p.d": {"p.a.x"}}
    assert _package_loops(graph) == [
        ["a", "b", "c", "p.a.x -> p.b.y", "p.b.y -> p.c.z", "p.c.z -> p.a.w"]
    ]
    assert _package_loops({"p.a.x": {"p.b.y"}, "p.b.y": {"p.c.z"}, "p.a.w": {"p.c.z"}}) == []
    assert _package_loops({"p.a.x": {"p.a.y"}, "p.a.y": {"p.a.x"}}) == []  # inside one package


# The house's floors, lowest first: a package imports its own floor's packages and those below,
# never one above (each floor's packages are in pipeline order too: no loop among them). The
# names are the top-level packages and modules; docs/layout.md draws the same floors.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (  # verl_bootstrap: the package's own __init__, which holds the version
        "foundation",
        frozenset({"verl_bootstrap", "errors", "events", "redact", "platforms", "safety"})
        | frozenset({"proc", "paths"}),
    ),
    ("facts", frozenset({"machine", "profile", "options", "httpclient"})),
    ("sources", frozenset({"source", "siteconfig"})),
    ("installers", frozenset({"installer"})),
    ("checks", frozenset({"verify", "kernels"})),
    ("locking", frozenset({"lock", "schemas"})),
    ("planning", frozenset({"plan"})),
    ("running", frozenset({"run"})),
    ("lab", frozenset({"lab"})),
    ("cli", frozenset({"cli", "__main__"})),
)


def _floor_of(package: str) -> int:
    return next(i for i, (_, members) in enumerate(LAYERS) if package in members)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a package to one on a higher floor, as `module -> module`."""
    return [
        f"{source} -> {target}"
        for source, targets in sorted(graph.items())
        for target in sorted(targets)
        if _floor_of(_package(target)) > _floor_of(_package(source))
    ]


def test_the_house_has_at_most_ten_floors_and_each_package_one() -> None:
    packages = {_package(m) for m in _modules()}
    placed = [p for _, members in LAYERS for p in members]
    assert len(LAYERS) <= 10
    assert sorted(placed) == sorted(set(placed)), "a package on two floors"
    assert sorted(packages - set(placed)) == [], "add the new package to a floor in LAYERS"


def test_every_import_goes_to_the_same_floor_or_below() -> None:
    assert _upward(_imports(_modules())) == []


def test_the_floor_check_finds_an_import_that_climbs() -> None:
    graph = {"verl_bootstrap.proc": {"verl_bootstrap.cli.parse"}}
    assert _upward(graph) == ["verl_bootstrap.proc -> verl_bootstrap.cli.parse"]


def test_the_layout_page_draws_the_same_floors() -> None:
    page = (PACKAGE.parent / "docs" / "layout.md").read_text(encoding="utf-8")
    drawn = page.split("## Floors", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    rows = [line for line in drawn.splitlines() if line.strip()]
    assert len(rows) == len(LAYERS)
    for row, (name, members) in zip(rows, reversed(LAYERS), strict=True):  # drawn top down
        floor, _, names = row.partition(":")
        assert floor.split()[-1] == name, row
        assert set(names.replace(",", " ").split()) == {m.removesuffix(".py") for m in members}


def test_every_module_name_is_its_own() -> None:
    """A module's name says what it holds, once in the package: a search for it finds one file
    (a command's module is named after its command, and probes/ holds scripts, not modules)."""
    seen: dict[str, list[str]] = defaultdict(list)
    for name, path in _modules().items():
        if path.name != "__init__.py" and "commands" not in path.parts:
            seen[path.stem].append(name)
    assert {stem: names for stem, names in seen.items() if len(names) > 1} == {}


def test_only_the_runner_uses_the_step_kinds() -> None:
    # run/steps/ holds step kinds (and their own helpers); run/compiler/ asks them to describe
    # their steps, the runner and installrun run them; a library others need lives elsewhere
    kinds = "verl_bootstrap.run.steps"
    runners = {"verl_bootstrap.run.runner", "verl_bootstrap.run.installrun"}
    users = {
        module
        for module, targets in _imports(_modules()).items()
        if not module.startswith((kinds, "verl_bootstrap.run.compiler"))
        and module not in runners
        and any(t.startswith(kinds) for t in targets)
    }
    assert users == set()


def _wide_functions(source: str, where: str) -> list[str]:
    """`where:line name (n)` for each function of `source` with over PARAMETER_LIMIT parameters
    (every kind counted: positional, keyword-only, *args, **kwargs; self and cls are not)."""
    wide = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            named = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
            count = len([p for p in named if p.arg not in {"self", "cls"}])
            if count > PARAMETER_LIMIT:
                wide.append(f"{where}:{node.lineno} {node.name} ({count})")
    return wide


def test_no_kernel_function_takes_over_six_parameters() -> None:
    wide = [
        found
        for pattern in NARROW_FILES
        for path in _narrow_paths(pattern)
        for found in _wide_functions(path.read_text(encoding="utf-8"), path.name)
    ]
    assert wide == []


def _narrow_paths(pattern: str) -> list[Path]:
    """The files `pattern` names: one that names none fails, so a rename cannot empty the check."""
    paths = sorted(PACKAGE.glob(pattern))
    assert paths, f"{pattern} names no file: follow the rename in NARROW_FILES"
    return paths


def test_the_parameter_count_counts_every_kind_but_self() -> None:
    source = (
        "class K:\n"
        "    def m(self, a, b, c, d, e, f): ...\n"
        "def wide(a, /, b, *c, d, e=1, **f): ...\n"
        "def wider(a, b, c, d, e, f, *, g): ...\n"
    )
    assert _wide_functions(source, "x.py") == ["x.py:4 wider (7)"]


def test_the_top_level_stays_short() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_LIMIT, top


def _startup(path: Path) -> bool:
    cli = PACKAGE / "cli"
    return (path.parent == cli and path.stem in STARTUP) or path.parent == cli / "commands"


def test_every_deferred_import_says_why() -> None:
    bare = []
    for path in PACKAGE.rglob("*.py"):
        if "probes" in path.parts or _startup(path):
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


def _layout() -> str:
    """The text block of docs/layout.md that lays out the package."""
    page = (PACKAGE.parent / "docs" / "layout.md").read_text(encoding="utf-8")
    return page.split("```text\nverl_bootstrap/\n", 1)[1].split("```", 1)[0]


def _entries(layout: str) -> dict[str, str]:
    """Each package's entry in the layout block: `name/` at the start of a line, to the next."""
    found = re.split(r"^  (\w+/)", layout, flags=re.M)[1:]
    return dict(zip(found[::2], found[1::2], strict=True))


def test_the_layout_page_names_every_package_and_top_level_module() -> None:
    layout = _layout()
    packages = sorted(
        p.parent.name + "/" for p in PACKAGE.glob("*/**/__init__.py") if "probes" not in p.parts
    )
    modules = sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py")
    assert [name for name in packages + modules if name not in layout] == []


def test_the_layout_page_names_every_module_in_its_package_entry() -> None:
    """A package's entry names the modules of its subpackages too (indented under it); probes/
    holds scripts run in another interpreter, named as a group."""
    entries = _entries(_layout())
    missing = [
        f"{package.name}/{module.relative_to(package).with_suffix('')}"
        for package in sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))
        if package.name != "probes"
        for module in sorted(package.rglob("*.py"))
        if module.stem != "__init__"
        and not re.search(rf"\b{module.stem}\b", entries.get(package.name + "/", ""))
    ]
    assert missing == []


def test_the_readme_links_the_layout_page() -> None:
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    assert "(docs/layout.md)" in readme


def test_the_layout_page_names_every_command_module() -> None:
    """cli/commands/ is a folder of cli/'s entry: each command's module is named there too."""
    entry = _entries(_layout())["cli/"]
    modules = sorted((PACKAGE / "cli" / "commands").glob("*.py"))
    missing = [m.stem for m in modules if not re.search(rf"\b{m.stem}\b", entry)]
    assert missing == []


# --- the tests' own house: one scaffold runs the CLI (tests/scaffold.py) -------------------------

TESTS = Path(__file__).resolve().parent
SCAFFOLD = TESTS / "scaffold.py"
SUBPROCESS_CALLS = {"run", "Popen", "check_output", "check_call", "call"}


def _cli_mains(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names this module calls the in-process CLI by: (aliases of the `cli` module, aliases
    of its `main`/`main_entry`)."""
    modules, mains = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "verl_bootstrap":
            modules |= {a.asname or a.name for a in node.names if a.name == "cli"}
        if isinstance(node, ast.ImportFrom) and node.module == "verl_bootstrap.cli":
            mains |= {a.asname or a.name for a in node.names if a.name in {"main", "main_entry"}}
    return modules, mains


def _called(call: ast.Call) -> str:
    """The called name as written: `main`, `cli.main`, `subprocess.run` (else "")."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return func.id if isinstance(func, ast.Name) else ""


def _calls_the_cli(node: ast.AST, modules: set[str], mains: set[str]) -> bool:
    """Whether `node` holds a call of the CLI's main in this process."""
    mine = mains | {f"{m}.{f}" for m in modules for f in ("main", "main_entry")}
    return any(_called(n) in mine for n in ast.walk(node) if isinstance(n, ast.Call))


def _starts_the_tool(node: ast.AST) -> bool:
    """Whether `node` passes the console script (a name TOOL) to a subprocess call."""
    spawns = {f"subprocess.{f}" for f in SUBPROCESS_CALLS}
    return any(
        _called(n) in spawns and n.args and any(_is_tool(a) for a in ast.walk(n.args[0]))
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
    )


def _is_tool(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "TOOL"


def _spells_the_command(tree: ast.Module) -> list[int]:
    """Lines that spell the tool's command line: `-m verl_bootstrap`, or the console script's path
    beside this interpreter."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List | ast.Tuple):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if any(a == "-m" and b == "verl_bootstrap" for a, b in itertools.pairwise(words)):
                lines.append(node.lineno)
        if isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant):
            beside = "sys.executable" in ast.unparse(node.left)
            if beside and node.right.value == "verl-bootstrap":
                lines.append(node.lineno)
    return lines


def cli_helper_copies(source: str, name: str) -> list[str]:
    """Where a test module runs the CLI by hand instead of through the scaffold: a helper (any
    function but a test) that calls its main or starts its console script, or any spelling of
    its command line."""
    tree = ast.parse(source)
    modules, mains = _cli_mains(tree)
    found = [f"{name}:{line}: spells the tool's command line" for line in _spells_the_command(tree)]
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("test_"):
            continue
        if _calls_the_cli(node, modules, mains) or _starts_the_tool(node):
            found.append(f"{name}:{node.lineno}: {node.name} runs the CLI")
    return found


def test_only_the_scaffold_runs_the_cli_for_the_tests() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path != SCAFFOLD and "data" not in path.relative_to(TESTS).parts:
            found += cli_helper_copies(path.read_text(encoding="utf-8"), path.name)
    assert not found, "run the CLI through tests/scaffold.py: " + ", ".join(found)


def test_the_helper_finder_finds_each_kind_of_copy() -> None:
    copies = {
        "from verl_bootstrap import cli\ndef run(argv):\n    return cli.main(argv)\n": "run",
        "from verl_bootstrap.cli import main as m\ndef go():\n    m([])\n": "go",
        "import subprocess\ndef t():\n    subprocess.run([TOOL, 'plan'])\n": "t",
        "import sys\nARGV = [sys.executable, '-m', 'verl_bootstrap']\n": "command line",
        "from pathlib import Path\nT = Path(sys.executable).parent / 'verl-bootstrap'\n": "line",
    }
    for source, what in copies.items():
        [found] = cli_helper_copies(source, "m.py")
        assert what in found, (source, found)
    allowed = "from verl_bootstrap import cli\ndef test_x():\n    assert cli.main([]) == 0\n"
    assert cli_helper_copies(allowed, "m.py") == []
