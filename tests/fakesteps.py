"""Outputs for the stand-in executors of the runner's tests: the runner keeps whatever a step
kind's outputs hold (StepOutputs.to_json), so a stand-in step leaves which step it was, and the
commit a fake fetch-source says it got."""

from __future__ import annotations

from dataclasses import dataclass

from verl_bootstrap.plan.stepcontract import StepOutputs

__all__ = ["Ran"]


@dataclass(frozen=True)
class Ran(StepOutputs):
    ran: str | None = None
    commit: str | None = None
