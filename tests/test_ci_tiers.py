"""CI runs the README's test commands, and the two tiers `make test` and `make test-real` split
the suite between them: what one leaves out the other runs, so no test is dropped from CI."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# what neither tier runs: the heavy tier, GPU hosts, the wheel smoke test (make smoke-wheel), the
# older refs' training envs (make test-train-refs)
ELSEWHERE = "not heavy and not gpu and not wheel and not train_refs"


def _recipe(target: str) -> str:
    """The one pytest line of Makefile target `target`."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(target)}:.*\n\t(.+)$", text, re.MULTILINE)
    assert found, f"Makefile has no target {target}"
    return found.group(1)


def _marks(target: str) -> str:
    found = re.search(r'-m "([^"]+)"', _recipe(target))
    assert found, _recipe(target)
    return found.group(1)


def test_the_two_tiers_split_the_suite_on_real_slow_and_leave_out_the_same_rest() -> None:
    assert _marks("test") == f"{ELSEWHERE} and not real_slow"
    assert _marks("test-real") == f"real_slow and {ELSEWHERE}"
    assert _recipe("test").endswith(" tests") and _recipe("test-real").endswith(" tests")


def test_ci_runs_both_tiers_and_only_commands_the_readme_gives() -> None:
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line[:5] == "make "]
    assert ci.index("make test") < ci.index("make test-real")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    for command in ci:  # a command of its own ($ make X) or named where the two tiers are
        said = re.search(rf"{re.escape(command)}(?=[\s,.]|$)", section, re.MULTILINE)
        assert said, f"{command} (.ci/run) is not in README's Tests section"
