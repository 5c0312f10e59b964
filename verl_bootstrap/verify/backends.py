"""What verl runs for each backend, beyond the packages a profile lists: the engine adapter
modules (verl.workers.rollout.sglang_rollout's own __init__ is a licence header alone), the
Megatron bridge code, and the names verl imports lazily from Megatron-Bridge for LoRA and
checkpointing (an older Megatron-Bridge lacks them, and only a LoRA run would find out).

Read from verl 0.9.1's sdist (tests/test_verify_backends.py checks each name against it); verify
imports them for a verl of that release or later, and says so where the env's verl is older.

Beside them, what the engine loads at run time and no import of verl's reaches: vLLM's sampling
and speculative-decoding modules (its GPU model runner imports them when the engine starts; the
n-gram proposer imports numba, which refuses a numpy newer than it supports). Read from the file
list of the vLLM 0.24.0 wheel on the default index, the vLLM verl 0.9.1 pins (the test checks
each against it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["BACKEND_IMPORTS", "ENGINE_IMPORTS", "SINCE", "VLLM", "backend_imports"]

SINCE: Final = "0.9.1"  # the verl release the names below were read from
VLLM: Final = "0.24.0"  # the vLLM release ENGINE_IMPORTS were read from (verl 0.9.1's pin)

# a module a profile's verify imports (its backend's package) -> what verify imports besides;
# "module:name" is a name verl imports from that module inside a function
BACKEND_IMPORTS: Final[dict[str, tuple[str, ...]]] = {
    "verl.workers.rollout.sglang_rollout": (
        "verl.workers.rollout.sglang_rollout.sglang_rollout",
        "verl.workers.rollout.sglang_rollout.async_sglang_server",
    ),
    "verl.workers.rollout.vllm_rollout": (
        "verl.workers.rollout.vllm_rollout.vllm_rollout",
        "verl.workers.rollout.vllm_rollout.vllm_async_server",
    ),
    "verl.workers.engine.megatron": (
        "verl.workers.engine.megatron.transformer_impl",
        "verl.models.mcore.bridge",
        "verl.models.mcore.mbridge",
        "verl.workers.config.megatron_peft",
        "megatron.bridge.peft.utils:create_peft",  # verl.workers.config.megatron_peft
        "megatron.bridge.peft.utils:create_peft_hook",  # verl.utils.megatron_utils
        "megatron.bridge.peft.utils:load_peft_adapter_checkpoint",
        "megatron.bridge.training.utils.config_utils:create_ddp_config",
        # verl.utils.checkpoint.megatron_checkpoint_manager
        "megatron.bridge.training.checkpointing:save_fsdp_dtensor_checkpoint",
        "megatron.bridge.training.checkpointing:load_fsdp_dtensor_checkpoint",
    ),
}


# a module a profile's verify imports -> the engine's modules its run loads besides
ENGINE_IMPORTS: Final[dict[str, tuple[str, ...]]] = {
    "verl.workers.rollout.vllm_rollout": (
        "vllm.v1.sample.sampler",
        "vllm.v1.sample.rejection_sampler",
        "vllm.v1.spec_decode.eagle",
        "vllm.v1.spec_decode.draft_model",
        "vllm.v1.spec_decode.medusa",
        "vllm.v1.spec_decode.ngram_proposer",  # imports numba at module level
        "numba",
    ),
}


def backend_imports(imports: Iterable[str]) -> tuple[str, ...]:
    """What verify imports for the backends whose packages `imports` names (those not in it)."""
    named = tuple(imports)
    tables = (BACKEND_IMPORTS, ENGINE_IMPORTS)
    extra = [m for table in tables for key, more in table.items() if key in named for m in more]
    return tuple(dict.fromkeys(m for m in extra if m not in named))
