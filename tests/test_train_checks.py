"""`verify --train`'s checks say what they check, on the metrics a step logs: a loss is only
checked to be finite (a first, on-policy GRPO step's policy loss is near 0 by construction: each
prompt's advantages average 0), the gradient must be above 0 (a zero one changed no weight), and
a metric the step did not log fails naming it. The steps themselves run in test_verify_train.py
(real_slow); these are the metrics verl logs, as verl_bootstrap/verify/train.py reads them.
"""

from __future__ import annotations

from verl_bootstrap.verify.train import _step_checks

RL = {
    "actor/pg_loss": 0.0,  # what a run with equal response lengths logs
    "actor/grad_norm": 1.097,
    "critic/score/mean": 0.04375,
    "critic/advantages/max": 1.414,
    "critic/advantages/min": -1.414,
    "training/rollout_probs_diff_max": 1.06e-4,
    "training/rollout_probs_diff_mean": 3.06e-5,
}


def _details(level: str, metrics: dict[str, float]) -> dict[str, tuple[str, str]]:
    checks, _ = _step_checks(level, metrics)
    return {c.name: (c.status, c.detail) for c in checks}


def test_a_zero_policy_loss_passes_saying_why_that_is_all_it_shows() -> None:
    status, detail = _details("rl", RL)["loss"]
    assert status == "ok"
    assert detail.startswith("policy loss 0: finite, which is all this check asks: ")
    assert "near 0 by construction (each prompt's advantages average 0" in detail
    assert "the advantages, gradient and weights checks show the update" in detail


def test_the_gradient_must_be_above_zero_and_each_figure_says_what_is_checked() -> None:
    assert _details("rl", RL)["gradient"] == ("ok", "grad norm 1.097: finite and above 0")
    assert _details("rl", RL)["reward"] == ("ok", "mean reward 0.04375: finite")
    status, detail = _details("rl", {**RL, "actor/grad_norm": 0.0})["gradient"]
    assert status == "fail" and detail.endswith("no gradient reached the weights")
    sft = _details("sft", {"train/loss": 5.656, "train/grad_norm": 4.211})
    assert sft == {
        "loss": ("ok", "loss 5.656: finite"),
        "gradient": ("ok", "grad norm 4.211: finite and above 0"),
    }


def test_a_figure_not_logged_or_not_finite_fails_naming_it() -> None:
    assert _details("sft", {})["loss"] == ("fail", "no loss logged")
    assert _details("sft", {})["gradient"] == ("fail", "no grad norm logged")
    nan = _details("sft", {"train/loss": float("nan"), "train/grad_norm": 1.0})["loss"]
    assert nan == ("fail", "loss nan: not finite")
