"""Whether an install's verify runs a training step (`install --train`), and why.

The rule (docs/train.md): a GPU profile installed on a GPU host gets the RL level (one GRPO step
with the env's own rollout) in its verify while that step costs under a tenth of the install.
The cost is the env's own: the install's time is the sum of its recorded steps, the RL step's is
what the env recorded when it last ran one; with none recorded yet, the step runs and its time is
recorded for the next decision. A CPU env never gets one unasked (on the cpu profile the RL step
takes minutes): `--train sft|rl` asks, `--train none` opts out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BUDGET", "TrainDecision", "install_cost", "planned_level", "within_budget"]

BUDGET = 0.1  # the RL step may cost this share of the install's time


@dataclass(frozen=True)
class TrainDecision:
    """The level the install's verify runs (None: none), and why."""

    level: str | None
    reason: str
    auto: bool = False  # chosen by the rule, so the recorded cost may still drop it at run time


def planned_level(asked: str, *, gpu_profile: bool, variant: str, gpu_host: bool) -> TrainDecision:
    """What the plan shows: the level `--train` asked for, or the rule's choice for `auto`."""
    if asked == "none":
        return TrainDecision(None, "--train none")
    if asked != "auto":
        return TrainDecision(asked, f"--train {asked}")
    if not gpu_profile or variant == "cpu":
        return TrainDecision(None, "a CPU env: opt-in, --train sft|rl")
    if not gpu_host:
        return TrainDecision(None, "no NVIDIA driver on this host to train on")
    return TrainDecision(
        "rl",
        f"a GPU profile on a GPU host, while the step costs under {BUDGET:.0%} of the install",
        auto=True,
    )


def install_cost(steps: Mapping[str, Mapping[str, Any]], *, but: str = "verify") -> float | None:
    """The install's time: its recorded steps' (all but `but`), None when none finished."""
    spans = [
        float(r["finished"]) - float(r["started"])
        for name, r in steps.items()
        if name != but and r.get("status") == "done" and r.get("finished") is not None
    ]
    return sum(spans) if spans else None


def within_budget(rl_seconds: float | None, install_seconds: float | None) -> tuple[bool, str]:
    """Whether the RL step stays in the install's verify, and the figures that say so."""
    if rl_seconds is None or install_seconds is None:
        return True, "no RL step recorded in this env yet: this run measures it"
    share = rl_seconds / install_seconds if install_seconds > 0 else float("inf")
    figures = f"the RL step took {rl_seconds:.0f} s, the install {install_seconds:.0f} s"
    if share < BUDGET:
        return True, f"{figures} ({share:.0%}, under {BUDGET:.0%})"
    return False, f"{figures} ({share:.0%}, not under {BUDGET:.0%}): run `verify --train rl`"
