"""What verl runs for each backend, beyond the packages a profile lists: the engine adapter
modules (verl.workers.rollout.sglang_rollout's own __init__ is a licence header alone), the
Megatron bridge code, and the names verl imports lazily from Megatron-Bridge for LoRA and
checkpointing (an older Megatron-Bridge lacks them, and only a LoRA run would find out).

Read from verl 0.9.1's sdist (tests/test_verify_backends.py checks each name against it); verify
imports them for a verl of that release or later, and says so where the env's verl is older.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["BACKEND_IMPORTS", "SINCE", "backend_imports"]

SINCE: Final = "0.9.1"  # the verl release the names below were read from

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


def backend_imports(imports: Iterable[str]) -> tuple[str, ...]:
    """What verify imports for the backends whose packages `imports` names (those not in it)."""
    named = tuple(imports)
    extra = [m for key, more in BACKEND_IMPORTS.items() if key in named for m in more]
    return tuple(dict.fromkeys(m for m in extra if m not in named))
