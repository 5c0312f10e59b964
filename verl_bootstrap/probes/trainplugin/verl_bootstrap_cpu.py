"""What a verl release lacks to train on a CPU, loaded through verl's own external-module hook
(VERL_USE_EXTERNAL_MODULES=verl_bootstrap_cpu); `verify --train` puts this folder on PYTHONPATH.

Runs INSIDE the target env, in every process that imports verl (the driver, torchrun's ranks,
Ray's workers). It changes nothing in the user's verl checkout and only adds to verl's registries:
a CPU platform (gloo, no accelerator), the FSDP engine registered for the CPU device, and a CPU
rollout (a Hugging Face model that samples token by token and returns its log-probs) registered
as rollout "hf". A verl release that brings its own CPU platform keeps it.
"""

from __future__ import annotations

import contextlib
import os
import types
from datetime import timedelta

import torch

ROLLOUT = "hf"


def _shim_device_module():
    """torch.cpu, plus the accelerator calls verl makes that torch.cpu lacks (all no-ops)."""
    shim = types.ModuleType("verl_bootstrap_cpu.device")
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(shim, name, getattr(torch.cpu, name))
    for name in (
        "empty_cache",
        "ipc_collect",
        "reset_peak_memory_stats",
        "set_per_process_memory_fraction",
    ):
        setattr(shim, name, lambda *a, **k: None)
    for name in (
        "memory_allocated",
        "memory_reserved",
        "max_memory_allocated",
        "max_memory_reserved",
    ):
        setattr(shim, name, lambda *a, **k: 0)
    shim.set_device = lambda *a, **k: None
    shim.get_device_name = lambda *a, **k: "CPU"
    shim.manual_seed = shim.manual_seed_all = torch.manual_seed
    shim.get_rng_state, shim.set_rng_state = torch.get_rng_state, torch.set_rng_state
    shim.mem_get_info = _mem_get_info
    return shim


def _mem_get_info(*_args, **_kwargs):
    pages, free = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_AVPHYS_PAGES")
    size = os.sysconf("SC_PAGE_SIZE")
    return free * size, pages * size


def _register_platform():
    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import PlatformRegistry

    if PlatformRegistry.get("cpu") is not None:  # the release's own CPU platform wins
        return
    device = _shim_device_module()

    class PlatformCPU(PlatformBase):
        device_name = property(lambda self: "cpu")
        vendor_name = property(lambda self: "cpu")
        device_module = property(lambda self: device)

        def is_available(self):
            return True

        def is_platform_available(self, use_smi_check=False):
            return os.environ.get("VERL_PLATFORM", "") == "cpu"  # only where it was asked for

        current_device = lambda self: "cpu"  # verl moves tensors `.to(current_device())`
        device_count = lambda self: 1
        set_device = synchronize = empty_cache = lambda self, *a: None
        manual_seed = manual_seed_all = lambda self, seed: torch.manual_seed(seed)
        set_allocator_settings = lambda self, settings: None
        get_device_capability = lambda self, index=0: (None, None)
        communication_backend_name = lambda self: "gloo"
        visible_devices_envvar = lambda self: "CUDA_VISIBLE_DEVICES"
        # Ray's worker groups ask for "GPU" units: `verify --train` starts Ray with placeholder ones
        ray_resource_name = lambda self: "GPU"
        ray_noset_envvars = lambda self: []
        is_ipc_supported = lambda self: False
        profiler_start = profiler_stop = lambda self: None
        cudart = lambda self: None

        @contextlib.contextmanager
        def nvtx_range(self, msg):
            yield

    PlatformRegistry.register(platform="cpu")(PlatformCPU)


def _gloo_process_groups():
    """verl asks for "cpu:gloo,<device>:<backend>", which names cpu twice on a CPU."""
    import verl.utils.distributed as dist

    ray_init = dist.initialize_global_process_group_ray

    def initialize_global_process_group(timeout_second=36000):
        torch.distributed.init_process_group(
            backend="cpu:gloo",
            timeout=timedelta(seconds=timeout_second),
            init_method=os.environ.get("DIST_INIT_METHOD", None),
        )
        return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return ray_init(timeout_second=timeout_second, backend=backend or "cpu:gloo")

    dist.initialize_global_process_group = initialize_global_process_group
    dist.initialize_global_process_group_ray = initialize_global_process_group_ray


def _register_engine():
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    EngineRegistry.register(model_type="language_model", backend=["fsdp", "fsdp2"], device="cpu")(
        FSDPEngineWithLMHead
    )


def _register_rollout():
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    base._ROLLOUT_REGISTRY[(ROLLOUT, "async")] = f"{__name__}.CPURolloutAdapter"
    RolloutReplicaRegistry.register(ROLLOUT, _replica_class)


def _server_name(replica_rank):
    return f"verl_bootstrap_cpu_rollout_{replica_rank}"


def _replica_class():
    """The RolloutReplica of the CPU rollout: one server actor per replica, holding the model."""
    import ray
    from verl.workers.rollout.replica import RolloutReplica

    class CPURolloutReplica(RolloutReplica):
        async def launch_servers(self):
            name = _server_name(self.replica_rank)
            server = ray.remote(CPURolloutServer).options(name=name, num_cpus=0, max_concurrency=64)
            handle = server.remote(self.config, self.model_config)
            await handle.ready.remote()
            self.servers = [handle]
            self._server_handle = handle
            self._server_address = name

    return CPURolloutReplica


class CPURolloutServer:
    """Token in, tokens out: samples from a Hugging Face model on the CPU, one token at a time,
    and gives each sampled token's log-prob (of the temperature-scaled distribution, as the
    trainer computes it)."""

    def __init__(self, config, model_config):
        from transformers import AutoModelForCausalLM

        self.response_length = int(config.response_length)
        path = model_config["path"]  # a DictConfig here; the model `verify --train` made is local
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32)
        self.model.eval()
        self.eos = self.model.generation_config.eos_token_id
        self.weight_updates = 0
        self.global_steps = 0  # the trainer's step whose weights this server holds

    def ready(self):
        return True

    def load_weights(self, state, global_steps=None):
        _missing, unexpected = self.model.load_state_dict(state, strict=False)
        if unexpected:  # names that fit no parameter would leave the rollout on the old weights
            raise RuntimeError(f"the rollout's model has no parameters named {unexpected[:3]}")
        self.weight_updates += 1
        if global_steps is not None:
            self.global_steps = global_steps
        return self.weight_updates

    @torch.no_grad()
    def generate(self, prompt_ids, sampling_params, request_id=None, **_kwargs):
        from verl.workers.rollout.replica import TokenOutput

        ids = torch.tensor([list(prompt_ids)])
        temperature = float(sampling_params.get("temperature", 1.0)) or 1.0
        limit = int(sampling_params.get("max_tokens") or self.response_length)
        tokens, logprobs = [], []
        for _ in range(limit):
            logits = self.model(input_ids=ids).logits[0, -1].float() / temperature
            logp = torch.log_softmax(logits, dim=-1)
            token = int(torch.multinomial(logp.exp(), 1))
            tokens.append(token)
            logprobs.append(float(logp[token]))
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
            if token == self.eos:
                break
        return TokenOutput(
            token_ids=tokens,
            log_probs=logprobs,
            stop_reason="completed",
            extra_fields={
                "global_steps": self.global_steps,
                "weight_updates": self.weight_updates,
            },
        )

    def wake_up(self):
        return None

    sleep = clear_kv_cache = release_kv_cache = resume_kv_cache = resume_generation = wake_up
    start_profile = stop_profile = wake_up

    def abort_all_requests(self, reject_request=False):
        return None


def _adapter_class():
    from verl.workers.rollout.base import BaseRollout

    class Adapter(BaseRollout):
        """The trainer side of the CPU rollout: hands the updated weights to its server."""

        async def resume(self, tags):
            return None

        async def release(self):
            return None

        async def update_weights(self, weights, wire_format="named_tensors", **kwargs):
            import ray

            state = {
                name: tensor.detach().to("cpu", torch.float32).clone() for name, tensor in weights
            }
            world = self.config.tensor_model_parallel_size * self.config.data_parallel_size
            replica = torch.distributed.get_rank() // world
            if torch.distributed.get_rank() % world == 0:
                server = ray.get_actor(_server_name(replica))
                await server.load_weights.remote(state, kwargs.get("global_steps"))

    return Adapter


def __getattr__(name):
    if name == "CPURolloutAdapter":  # built on first use: BaseRollout needs verl fully imported
        return _adapter_class()
    raise AttributeError(name)


def _load():
    _register_platform()
    _gloo_process_groups()
    for register in (_register_engine, _register_rollout):
        try:
            register()
        except ImportError:
            # a damaged env: verl must still import, so that `verify --train`, which imports
            # each part a level needs before it runs, names the one that is missing
            continue


_load()
