"""How `verify --train` runs a level in a given env: on a CPU through the tool's plugin, on a GPU
with the env's own rollout engine (vLLM or SGLang) and no plugin; or why it cannot run at all.

The commands are verl's own entry points with Hydra overrides sized for a tiny model: one step,
one checkpoint, Ray started with placeholder accelerator units on a CPU.

The RL step's Ray is the user's alone (`step_environment`): its servers listen on 127.0.0.1 only
(Ray's single-machine mode: with no cluster, the node's address is the loopback one, and its
servers bind to it), its session lives in a private temp folder made for the run (not the shared
/tmp/ray), and its token authentication reads a token from a file of mode 0600 in that folder,
so Ray writes none to ~/.ray/auth_token (which it makes readable by everyone).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from verl_bootstrap import proc
from verl_bootstrap.machine.gpu.detect import gpu_present
from verl_bootstrap.paths import PROBES

__all__ = ["PARTS", "Route", "cpu_blocker", "private_ray", "route_for", "step_environment"]

_PLUGIN_DIR = PROBES / "trainplugin"
_PLUGIN = "verl_bootstrap_cpu"
_ASSETS = PROBES / "train_assets.py"
_LOAD = PROBES / "load_modules.py"
# the part each level needs; an env that lacks one fails naming it, before any step runs
PARTS = {
    "sft": ("verl.trainer.sft_trainer", "verl.workers.engine.fsdp.transformer_impl"),
    "rl": (
        "verl.trainer.main_ppo",
        "verl.workers.engine_workers",
        "verl.workers.rollout.replica",
        "verl.workers.rollout.llm_server",
        "verl.experimental.agent_loop",
    ),
}
# the step's variables: offline, the user's site-packages left out, a Ray of its own
_ISOLATED = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_DEDUP_LOGS": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "PYTHONNOUSERSITE": "1",
    # the RL step's own Ray, always: with no address, verl's ray.init() joins a cluster that
    # `ray start` (or a Ray node of `cluster verify`) runs on this machine, and on a CPU its
    # placeholder units are then refused ("num_cpus ... must not be provided")
    "RAY_ADDRESS": "local",
}


@dataclass(frozen=True)
class Route:
    """One way to run a level: `cpu` (the plugin) or `gpu:<rollout>`; `blocked` says why none."""

    python: Path
    name: str
    rollout: str
    blocked: str = ""
    broken: bool = False  # blocked because a part is missing (a failure), not unsupported

    def environment(self) -> dict[str, str | None]:
        """The variables of the training processes (Ray's workers inherit them)."""
        env: dict[str, str | None] = dict(_ISOLATED)
        if self.name == "cpu":
            # the plugin folder first; a PYTHONPATH the user set stays after it
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(_PLUGIN_DIR), os.environ.get("PYTHONPATH")) if p
            )
            env["VERL_USE_EXTERNAL_MODULES"] = _PLUGIN
            env["VERL_PLATFORM"] = "cpu"
        return env

    def command(self, level: str, work: Path, ckpt: Path, steps: int) -> list[str]:
        """The entry point and its overrides for `steps` steps (2 resumes from step 1)."""
        if level == "sft":
            return self._sft(work, ckpt, steps)
        return self._rl(work, ckpt, steps)

    def _sft(self, work: Path, ckpt: Path, steps: int) -> list[str]:
        torchrun = [
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nnodes=1",
            "--nproc_per_node=1",
        ]
        return [
            str(self.python),
            *torchrun,
            "-m",
            "verl.trainer.sft_trainer",
            f"data.train_files={work / 'sft.parquet'}",
            "data.micro_batch_size_per_gpu=2",
            "data.train_batch_size=4",
            "data.max_length=128",
            "data.use_dynamic_bsz=False",
            "data.num_workers=0",
            "data.pad_mode=no_padding",
            f"model.path={work / 'model'}",
            "model.enable_gradient_checkpointing=False",
            *self._model_overrides("model"),
            "engine.use_torch_compile=False",
            "engine.strategy=fsdp2",
            f"engine.dtype={self._dtype}",
            "optim.lr=1e-3",
            *_trainer(ckpt, steps, self._device),
        ]

    def _rl(self, work: Path, ckpt: Path, steps: int) -> list[str]:
        a = "actor_rollout_ref"
        return [
            str(self.python),
            "-m",
            "verl.trainer.main_ppo",
            "algorithm.adv_estimator=grpo",
            "algorithm.use_kl_in_reward=False",
            f"data.train_files={work / 'rl.parquet'}",
            f"data.val_files={work / 'rl.parquet'}",
            "data.train_batch_size=2",
            "data.max_prompt_length=64",
            "data.max_response_length=16",
            "data.dataloader_num_workers=0",
            f"{a}.model.path={work / 'model'}",
            f"{a}.model.enable_gradient_checkpointing=False",
            *self._model_overrides(f"{a}.model"),
            f"{a}.actor.strategy=fsdp2",
            f"{a}.actor.fsdp_config.strategy=fsdp2",
            f"{a}.actor.fsdp_config.dtype={self._dtype}",
            f"{a}.actor.fsdp_config.use_torch_compile=False",
            f"{a}.actor.use_torch_compile=False",
            f"{a}.actor.ppo_mini_batch_size=2",
            f"{a}.actor.ppo_micro_batch_size_per_gpu=4",
            f"{a}.actor.use_kl_loss=False",
            f"{a}.actor.optim.lr=1e-3",
            f"{a}.ref.strategy=fsdp2",
            f"{a}.rollout.name={self.rollout}",
            f"{a}.rollout.n=4",
            f"{a}.rollout.tensor_model_parallel_size=1",
            f"{a}.rollout.log_prob_micro_batch_size_per_gpu=4",
            f"{a}.rollout.calculate_log_probs=True",
            f"{a}.rollout.agent.num_workers=1",
            *self._rollout_overrides(a),
            "reward.num_workers=1",
            # one storage actor, not eight: main_ppo turns TransferQueue on, and each is a process
            "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
            f"reward.custom_reward_function.path={_ASSETS}",
            "trainer.n_gpus_per_node=1",
            "trainer.nnodes=1",
            "trainer.val_before_train=False",
            "trainer.test_freq=-1",
            *_trainer(ckpt, steps, self._device),
            *self._ray_overrides(),
        ]

    @property
    def _device(self) -> str:
        return "cpu" if self.name == "cpu" else "cuda"

    @property
    def _dtype(self) -> str:
        # float32 on a CPU: the rollout samples in float32, so both sides score alike
        return "float32" if self.name == "cpu" else "bfloat16"

    def _model_overrides(self, key: str) -> list[str]:
        if self.name != "cpu":
            return []
        # no flash-attention on a CPU: SDPA, and no remove-padding (it needs flash-attn's kernels)
        return [
            f"{key}.use_remove_padding=False",
            f"+{key}.override_config.attn_implementation=sdpa",
        ]

    def _rollout_overrides(self, a: str) -> list[str]:
        if self.name == "cpu":
            return []
        return [f"{a}.rollout.gpu_memory_utilization=0.3", f"{a}.rollout.enforce_eager=True"]

    def _ray_overrides(self) -> list[str]:
        if self.name != "cpu":
            return []
        # verl's worker groups ask Ray for "GPU" units: one placeholder unit for the one worker
        return ["+ray_kwargs.ray_init.num_gpus=1", "ray_kwargs.ray_init.num_cpus=16"]


_TOKEN_FILE = "auth_token"
# Ray's session folder holds its Unix sockets (`.../ray/session_<time>_<pid>/sockets/raylet`,
# about 75 bytes past the folder), and a socket's path may be at most 107 bytes
_SHORT_TEMP = 32


@contextmanager
def step_environment(route: Route) -> Iterator[dict[str, str | None]]:
    """The variables of one training run (the route's, and a private Ray's), while it runs."""
    with private_ray() as ray:
        yield {**route.environment(), **ray}


@contextmanager
def private_ray() -> Iterator[dict[str, str | None]]:
    """The variables that give what runs with them a Ray of its own (a training step, verl's
    CPU tests): never the user's cluster or another run's, with a token only its processes read.
    Its folder, made here with mode 0700, is removed when the run is over."""
    folder = Path(tempfile.mkdtemp(prefix="vb-ray-", dir=_temp_base()))
    try:
        token = folder / _TOKEN_FILE
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as sink:
            sink.write(secrets.token_hex(32))
        yield _private_ray(folder, token)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _temp_base() -> str | None:
    """The system's temp folder, unless it is too long for Ray's sockets (then /tmp)."""
    base = tempfile.gettempdir()
    return base if len(base) <= _SHORT_TEMP or not Path("/tmp").is_dir() else "/tmp"


def _private_ray(folder: Path, token: Path) -> dict[str, str | None]:
    return {
        # ray.init() with no address joins RAY_ADDRESS's cluster, else the one whose address it
        # finds in its temp folder: "local" starts its own
        "RAY_ADDRESS": "local",
        "RAY_TMPDIR": str(folder),  # the session, its logs and sockets: not the shared /tmp/ray
        # Ray's single-machine mode (its default on macOS and Windows): the node's address is
        # 127.0.0.1, and Ray's servers then listen on it alone, not on every interface
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_AUTH_MODE": "token",  # a local user who finds the port still needs the token
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_AUTH_TOKEN": None,  # a token inherited (a Ray node's) would be read first
    }


def _trainer(ckpt: Path, steps: int, device: str) -> list[str]:
    return [
        f"trainer.total_training_steps={steps}",
        "trainer.save_freq=1",
        "trainer.resume_mode=auto",
        "trainer.logger=[console]",
        f"trainer.default_local_dir={ckpt}",
        f"trainer.device={device}",
    ]


def route_for(prefix: Path, python: Path, level: str, log_path: Path | None) -> Route:
    """The route for `level` in this env on this machine, with the parts it needs checked."""
    gpu = gpu_present()
    rollout = _gpu_rollout(python, log_path) if gpu else "hf"
    route = Route(python=python, name=f"gpu:{rollout}" if gpu else "cpu", rollout=rollout)
    why = _cannot_run(route, python, log_path)
    if why:
        return Route(python=python, name=route.name, rollout=rollout, blocked=why)
    missing = _missing_parts(route, level, log_path)
    if missing:
        return Route(python, route.name, rollout, blocked=missing, broken=True)
    return route


def _gpu_rollout(python: Path, log_path: Path | None) -> str:
    answer = _locate(python, log_path)
    return "vllm" if answer.get("vllm") else "sglang" if answer.get("sglang") else "none"


# what the CPU plugin needs of verl: (the answer's key, what it is, where it lives, whether a
# missing file means the release lacks it: verl/plugin/platform came in 0.9.0; the registries'
# files are in every release, so one missing is a damaged env, which the parts check names)
_CPU_HOOKS = (
    (
        "external_modules",
        "external-module hook",
        "VERL_USE_EXTERNAL_MODULES in verl/__init__.py",
        True,
    ),
    ("platform_registry", "platform registry", "verl/plugin/platform", True),
    ("engine_registry", "engine registry", "verl/workers/engine/base.py", False),
    ("rollout_registry", "rollout replica registry", "verl/workers/rollout/replica.py", False),
)


def cpu_blocker(found: Mapping[str, object]) -> str:
    """Why the tool's CPU plugin cannot train the verl `found` (train_assets.py locate's answer)
    describes; "" when it can. Each hook is the one public way the plugin supplies a part."""
    for key, what, where, file_is_release in _CPU_HOOKS:
        have = found.get(key)
        if have is False or (have is None and file_is_release):
            return (
                f"verl {found.get('version')} has no {what} ({where}), through which the tool "
                "supplies a CPU platform, engine and rollout: on a CPU this release cannot "
                "train without edits to verl; on a GPU host it runs as is"
            )
    return ""


def _cannot_run(route: Route, python: Path, log_path: Path | None) -> str:
    found = _locate(python, log_path)
    if not found.get("verl"):
        return "verl is not installed in this env"
    if route.name == "gpu:none":
        return "no rollout engine in this env (neither vllm nor sglang): the RL step needs one"
    return cpu_blocker(found) if route.name == "cpu" else ""


def _locate(python: Path, log_path: Path | None) -> dict[str, object]:
    done = proc.run(
        [str(python), str(_ASSETS), "locate"], log_path=log_path, check=False, keep_output=True
    )
    answer = proc.marked(done.output, "@@TRAIN@@")
    return answer if isinstance(answer, dict) else {}


def _missing_parts(route: Route, level: str, log_path: Path | None) -> str:
    parts = list(PARTS[level])
    if level == "rl" and route.name != "cpu":
        parts.append(route.rollout)
    done = proc.run(
        [str(route.python), str(_LOAD), *parts],
        log_path=log_path,
        env=route.environment(),
        check=False,
        keep_output=True,
    )
    answer = _last_json(done.output)
    broken = {k: v for k, v in answer.items() if v} if answer is not None else None
    if broken is None:
        return f"the env could not import verl's training parts (exit {done.returncode})"
    by_error: dict[str, list[str]] = {}
    for name, error in broken.items():  # one line per cause: a missing module breaks several
        by_error.setdefault(str(error).strip().splitlines()[-1], []).append(name)
    return "; ".join(f"{', '.join(names)} do not import: {e}" for e, names in by_error.items())


def _last_json(output: str) -> dict[str, str | None] | None:
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None
