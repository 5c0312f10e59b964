"""`verify --train sft|rl`: one real verl training step in the env, offline, and what it must show.

The inputs are made in the env, locally (a tiny random Qwen2, a tokenizer trained there, parquet
data: probes/train_assets.py); the step runs through verl's own entry points
(`torchrun -m verl.trainer.sft_trainer`, `python -m verl.trainer.main_ppo`); a second run resumes
from the first one's checkpoint. On a CPU, what verl lacks comes from the tool's own plugin
(probes/trainplugin), loaded through verl's VERL_USE_EXTERNAL_MODULES hook.
"""

from __future__ import annotations

import math
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_bootstrap import proc
from verl_bootstrap.errors import InputError
from verl_bootstrap.installer.envs.base import env_python
from verl_bootstrap.paths import PROBES
from verl_bootstrap.verify.env import Check
from verl_bootstrap.verify.trainroute import Route, route_for, step_environment
from verl_bootstrap.verify.trainscratch import not_loadable, train_folder

__all__ = ["LEVELS", "LOGPROB_TOLERANCE", "TrainReport", "record_entry", "train_step"]

LEVELS = ("sft", "rl")
LOGPROB_TOLERANCE = 1e-3  # rollout vs trainer log-prob of the same token, same weights
_ASSETS = PROBES / "train_assets.py"
# one run's limit: ten to twenty times what a run took on a loaded 2-core host (docs/train.md)
_LIMIT_S = {"sft": 900.0, "rl": 1800.0}
_MARK = "@@TRAIN@@"
_STEP = re.compile(r"\bstep:(\d+) - (.*)$")
_METRIC = re.compile(r"([\w/()@.-]+):(-?[\d.]+(?:e-?\d+)?|nan|-?inf)")
_LOADED = re.compile(r"(?:Loaded model from|Resuming from) (\S+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m|[\x00-\x08\x0b-\x1f\x7f]")
_ERROR = re.compile(r"\b((?!RayTaskError|ChildFailedError)\w*(?:Error|Exception)): (.+)$")


@dataclass(frozen=True)
class TrainReport:
    """One training level run in one env: each check with its figures."""

    prefix: str
    level: str
    route: str
    checks: tuple[Check, ...]
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every check passed."""
        return bool(self.checks) and all(c.status == "ok" for c in self.checks)

    def failures(self) -> list[str]:
        """One line per check that did not pass."""
        return [f"{c.name}: {c.detail}" for c in self.checks if c.status != "ok"]

    def to_json(self) -> dict[str, Any]:
        """The stable JSON form."""
        return {
            "prefix": self.prefix,
            "level": self.level,
            "route": self.route,
            "ok": self.ok,
            "seconds": self.seconds,
            "figures": self.figures,
            "checks": [c.__dict__ for c in self.checks],
        }


@dataclass(frozen=True)
class _Run:
    """One run of a verl entry point: its exit code, the metrics of each step it logged, the
    checkpoint it resumed from, and its error line."""

    code: int
    steps: dict[int, dict[str, float]]
    loaded: str | None
    error: str


def train_step(
    prefix: Path, level: str, *, log_path: Path | None = None, scratch: Path | None = None
) -> TrainReport:
    """Run `level` (sft or rl) in the env at `prefix` and check what the step shows; its inputs
    and checkpoints go under `scratch` (default: the env's own .verl-bootstrap/train/), which
    the caller made private (trainscratch.train_folder)."""
    if level not in LEVELS:
        raise InputError(f"--train {level!r} is not a level", hint="use --train sft or --train rl")
    python = env_python(prefix)
    if not python.exists():
        raise InputError(f"{prefix} is not an env (no {python})")
    started = time.monotonic()
    route = route_for(prefix, python, level, log_path)
    if route.blocked:
        status = "fail" if route.broken else "skipped"  # a damaged env fails; a ref says why not
        check = Check(name=f"{level} step", status=status, detail=route.blocked)
        return TrainReport(str(prefix), level, route.name, (check,))
    work = _fresh_workdir(scratch or train_folder(prefix, None), level)  # private
    assets = _probe(python, ["build", str(work)], log_path)
    checks, figures = _run_level(route, level, work, log_path)
    figures["model_parameters"] = assets["parameters"]
    seconds = round(time.monotonic() - started, 1)
    return TrainReport(str(prefix), level, route.name, tuple(checks), figures, seconds)


def _fresh_workdir(scratch: Path, level: str) -> Path:
    work = scratch / level
    shutil.rmtree(work, ignore_errors=True)  # the tool's own scratch: each run starts clean
    work.mkdir(mode=0o700, parents=True)
    return work


def _probe(python: Path, args: list[str], log_path: Path | None) -> dict[str, Any]:
    done = proc.run(
        [str(python), str(_ASSETS), *args], log_path=log_path, check=False, keep_output=True
    )
    answer: dict[str, Any] | None = proc.marked(done.output, _MARK)
    if answer is None:
        error = _last_error(done.output) or f"exit {done.returncode}"
        raise InputError(f"the env could not build the training inputs: {error}")
    return answer


def _run_level(
    route: Route, level: str, work: Path, log_path: Path | None
) -> tuple[list[Check], dict[str, Any]]:
    ckpt = work / "checkpoints"
    first = _launch(route, level, work, ckpt, steps=1, log_path=log_path)
    if first.code != 0 or 1 not in first.steps:
        detail = first.error or f"exit {first.code}, no step logged"
        return [Check(name=f"{level} step", status="fail", detail=detail)], {}
    checks, figures = _step_checks(level, first.steps[1])
    if (refused := _unloadable(ckpt)) is not None:  # the weights probe unpickles it
        return [*checks, refused], figures
    moved = _probe(
        route.python, ["weights", str(work / "model"), str(ckpt / "global_step_1")], log_path
    )
    checks.append(_weights_check(moved))
    figures["weights"] = moved
    if (refused := _unloadable(ckpt)) is not None:  # and verl, on resume, once more
        return [*checks, refused], figures
    again = _launch(route, level, work, ckpt, steps=2, log_path=log_path)
    checks.append(_resume_check(again, ckpt / "global_step_1"))
    return checks, figures


def _unloadable(ckpt: Path) -> Check | None:
    """A failed resume when the checkpoint may not be loaded: both the weights probe and verl
    read it with torch.load(weights_only=False), so only what the user alone wrote is."""
    why = not_loadable(ckpt)
    detail = f"the checkpoint is not loaded: {why}"
    return None if why is None else Check(name="resume", status="fail", detail=detail)


def _launch(
    route: Route, level: str, work: Path, ckpt: Path, *, steps: int, log_path: Path | None
) -> _Run:
    args = route.command(level, work, ckpt, steps)
    limit = _LIMIT_S[level]
    with step_environment(route) as env:  # the RL step's Ray: private to this run
        done = proc.run(
            args, log_path=log_path, env=env, cwd=work, check=False, keep_output=True, timeout=limit
        )
    run = _parse(done.returncode, done.output)
    if done.timed_out:  # a Ray that never schedules its workers waits forever: say so instead
        return _Run(done.returncode or 1, run.steps, run.loaded, f"stopped after {limit:.0f} s")
    return run


def _parse(code: int, output: str) -> _Run:
    steps: dict[int, dict[str, float]] = {}
    loaded = None
    for line in output.splitlines():
        if (m := _STEP.search(line)) is not None:
            steps[int(m.group(1))] = {k: float(v) for k, v in _METRIC.findall(m.group(2))}
        elif (m := _LOADED.search(line)) is not None:
            loaded = m.group(1)
    return _Run(code=code, steps=steps, loaded=loaded, error=_last_error(output))


def _last_error(output: str) -> str:
    """The last exception line a run printed, the one that names the part that broke."""
    lines = _ANSI.sub("", output).splitlines()
    found = [m.group(0) for line in lines if (m := _ERROR.search(line))]
    return found[-1].strip() if found else ""


def _step_checks(level: str, metrics: dict[str, float]) -> tuple[list[Check], dict[str, Any]]:
    if level == "sft":
        return _sft_checks(metrics)
    return _rl_checks(metrics)


# what a first GRPO step's policy loss can show: only that it is finite (see _rl_checks)
_ON_POLICY = (
    ", which is all this check asks: a first, on-policy GRPO step's policy loss is near 0 by "
    "construction (each prompt's advantages average 0 and the policy ratio is 1), so the "
    "advantages, gradient and weights checks show the update"
)


def _finite(name: str, value: float | None, what: str, why: str = "") -> Check:
    """A figure that must be a number: the detail says that this is what is checked."""
    ok = value is not None and math.isfinite(value)
    detail = f"{what} {value:.4g}: finite{why}" if ok else f"{what} {value}: not finite"
    return Check(name=name, status="ok" if ok else "fail", detail=_logged(value, what, detail))


def _gradient(value: float | None) -> Check:
    """The gradient norm must be a number above 0: a zero one changed no weight."""
    ok = value is not None and math.isfinite(value) and value > 0
    detail = f"grad norm {value:.4g}: finite and above 0" if ok else f"grad norm {value}"
    if value == 0:
        detail += ": no gradient reached the weights"
    return Check(
        name="gradient", status="ok" if ok else "fail", detail=_logged(value, "grad norm", detail)
    )


def _logged(value: float | None, what: str, detail: str) -> str:
    return detail if value is not None else f"no {what} logged"


def _sft_checks(m: dict[str, float]) -> tuple[list[Check], dict[str, Any]]:
    loss, grad = m.get("train/loss"), m.get("train/grad_norm")
    checks = [_finite("loss", loss, "loss"), _gradient(grad)]
    return checks, {"loss": loss, "grad_norm": grad}


def _rl_checks(m: dict[str, float]) -> tuple[list[Check], dict[str, Any]]:
    loss, grad = m.get("actor/pg_loss"), m.get("actor/grad_norm")
    reward = m.get("critic/score/mean")
    adv_max, adv_min = m.get("critic/advantages/max"), m.get("critic/advantages/min")
    spread = None if adv_max is None or adv_min is None else max(abs(adv_max), abs(adv_min))
    diff = m.get("training/rollout_probs_diff_max")
    checks = [
        _finite("loss", loss, "policy loss", _ON_POLICY),
        _gradient(grad),
        _finite("reward", reward, "mean reward"),
        _advantage_check(spread),
        _logprob_check(diff, m.get("training/rollout_probs_diff_mean")),
    ]
    figures = {
        "policy_loss": loss,
        "grad_norm": grad,
        "reward_mean": reward,
        "advantage_max_abs": spread,
        "logprob_diff_max": diff,
    }
    return checks, figures


def _advantage_check(spread: float | None) -> Check:
    ok = spread is not None and math.isfinite(spread) and spread > 0
    detail = f"max |advantage| {spread:.4g}" if spread is not None else "no advantages logged"
    if spread == 0:
        detail += " (every sample of a prompt got the same reward: no gradient)"
    return Check(name="advantages", status="ok" if ok else "fail", detail=detail)


def _logprob_check(diff: float | None, mean: float | None) -> Check:
    if diff is None:
        return Check(
            name="log-prob agreement", status="fail", detail="the rollout gave no log-probs"
        )
    ok = math.isfinite(diff) and diff <= LOGPROB_TOLERANCE
    detail = (
        f"rollout vs trainer: max {diff:.2e}, mean {mean or 0:.2e} "
        f"(tolerance {LOGPROB_TOLERANCE:g})"
    )
    return Check(name="log-prob agreement", status="ok" if ok else "fail", detail=detail)


def _weights_check(moved: dict[str, Any]) -> Check:
    changed, compared = moved["changed"], moved["compared"]
    ok = compared > 0 and changed > 0 and moved["finite"]
    delta = moved["max_abs_delta"]
    detail = f"{changed} of {compared} tensors changed in the checkpoint, max |delta| {delta:.3g}"
    if not moved["finite"]:
        detail += "; some saved weights are not finite"
    return Check(name="weights changed", status="ok" if ok else "fail", detail=detail)


def _resume_check(run: _Run, checkpoint: Path) -> Check:
    resumed = run.loaded is not None and str(checkpoint) in run.loaded
    if run.code == 0 and resumed and 2 in run.steps:
        return Check(name="resume", status="ok", detail=f"step 2 ran from {checkpoint.name}")
    why = run.error or ("it did not load the checkpoint" if not resumed else "no step 2 logged")
    return Check(name="resume", status="fail", detail=f"resume from {checkpoint.name}: {why}")


def record_entry(report: TrainReport) -> dict[str, Any]:
    """The level's result as the env's state keeps it (field `train`; state/runlog)."""
    return {
        "ok": report.ok,
        "route": report.route,
        "seconds": report.seconds,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "figures": _plain(report.figures),
        "failed": report.failures(),
    }


def _plain(value: Any) -> Any:
    """Figures as JSON keeps them: a NaN or infinity as its text."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
