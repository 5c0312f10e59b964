"""Runs INSIDE the target env's interpreter: the local inputs of `verify --train` and the reading
of what its training step left behind.

Nothing is downloaded: a tiny random Qwen2, a byte-level BPE tokenizer trained here, and parquet
data made here. Uses only the env's own packages (torch, transformers, tokenizers, pyarrow,
safetensors); answers with one JSON object on a marked line.
Usage: python train_assets.py locate
       python train_assets.py build WORKDIR
       python train_assets.py weights BEFORE_DIR AFTER_DIR
       python train_assets.py reward   (prints nothing: the module is the shaped reward)
"""

from __future__ import annotations

import json
import os
import sys

MARK = "@@TRAIN@@"
SEED = 7
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _questions(count):
    """Small sums with their answers: text to train the tokenizer on and the tasks of the data."""
    out = []
    for i in range(count):
        a, b = (i * 7) % 23 + 1, (i * 5) % 17 + 2
        out.append((f"What is {a} plus {b}? Answer with #### and the number.", str(a + b)))
    return out


def _tokenizer(workdir):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = [f"{q} #### {a} user assistant system" for q, a in _questions(200)]
    bpe.train_from_iterator(corpus, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(workdir)
    return tok


def _model(workdir, tok):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(SEED)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(workdir, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def _write(path, columns):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)


def _sft_data(path):
    rows = [
        [{"role": "user", "content": q}, {"role": "assistant", "content": f"#### {a}"}]
        for q, a in _questions(16)
    ]
    _write(path, {"messages": rows})


def _rl_data(path):
    tasks = _questions(16)
    _write(
        path,
        {
            "data_source": ["openai/gsm8k"] * len(tasks),
            "prompt": [[{"role": "user", "content": q}] for q, _ in tasks],
            "ability": ["math"] * len(tasks),
            "reward_model": [{"style": "rule", "ground_truth": a} for _, a in tasks],
            "extra_info": [{"split": "train", "index": i} for i in range(len(tasks))],
        },
    )


def build(workdir):
    """The model (with its tokenizer) and both data sets under `workdir`."""
    model_dir = os.path.join(workdir, "model")
    os.makedirs(model_dir, exist_ok=True)
    tok = _tokenizer(model_dir)
    params = _model(model_dir, tok)
    _sft_data(os.path.join(workdir, "sft.parquet"))
    _rl_data(os.path.join(workdir, "rl.parquet"))
    return {"model": model_dir, "parameters": params, "vocab": len(tok)}


def _tensors(folder):
    """Every tensor saved under `folder` (safetensors files or torch shards), by name."""
    import torch
    from safetensors.torch import load_file

    found = {}
    for root, _dirs, files in os.walk(folder):
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.endswith(".safetensors"):
                found.update(load_file(path))
            elif name.startswith("model_world_size") and name.endswith(".pt"):
                state = torch.load(path, map_location="cpu", weights_only=False)
                found.update({k: _local(v) for k, v in state.items()})
    return found


def _local(value):
    """A DTensor shard's local part (a checkpoint of one rank holds the whole tensor)."""
    to_local = getattr(value, "to_local", None)
    return to_local() if to_local else value


def _bare(name):
    for prefix in ("_fsdp_wrapped_module.", "module.", "model."):
        name = name.replace(prefix, "")
    return name


def weights(before_dir, after_dir):
    """How far the saved checkpoint's weights moved from the initial model's."""
    before = {_bare(k): v.float() for k, v in _tensors(before_dir).items()}
    after = {_bare(k): v.float() for k, v in _tensors(after_dir).items()}
    common = sorted(set(before) & set(after))
    changed = [
        k for k in common if before[k].shape == after[k].shape and not before[k].equal(after[k])
    ]
    delta = max((float((after[k] - before[k]).abs().max()) for k in changed), default=0.0)
    finite = all(bool(after[k].isfinite().all()) for k in common)
    return {
        "compared": len(common),
        "changed": len(changed),
        "max_abs_delta": delta,
        "finite": finite,
        "checkpoint_tensors": len(after),
    }


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **_kwargs):
    """The shaped reward of the RL step: exact answer 1, else a small term that varies with the
    text, so that a random model's samples get different rewards and a non-zero advantage."""
    if f"#### {ground_truth}" in solution_str:
        return 1.0
    digits = sum(ch.isdigit() for ch in solution_str)
    return 0.1 * min(digits, 5) / 5 - 0.01 * (len(solution_str) % 7)


# the public hooks the tool's CPU plugin and the levels use: (file in verl's package, text in it)
HOOKS = {
    "external_modules": ("__init__.py", "VERL_USE_EXTERNAL_MODULES"),
    "platform_registry": ("plugin/platform/platform_manager.py", "class PlatformRegistry"),
    "engine_registry": ("workers/engine/base.py", "class EngineRegistry"),
    "rollout_registry": ("workers/rollout/replica.py", "class RolloutReplicaRegistry"),
}


def _has(folders, relative, text):
    """True: the file has the hook; False: the file is there without it; None: no such file
    (a release without it, or an env with the file removed: the parts check tells which)."""
    found = None
    for folder in folders:
        try:
            with open(os.path.join(folder, *relative.split("/")), encoding="utf-8") as fh:
                if text in fh.read():
                    return True
        except OSError:
            continue
        found = False
    return found


def _version_file(folders):
    for folder in folders:
        try:
            with open(os.path.join(folder, "version", "version"), encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError:
            continue
    return None


def locate():
    """verl's version, which of the hooks it has, and which rollout engines are installed,
    without importing any of them (an import of verl would load the plugin)."""
    import importlib.metadata as md
    import importlib.util

    spec = importlib.util.find_spec("verl")
    folder = list(spec.submodule_search_locations or []) if spec else []
    answer = {"verl": bool(folder)}
    answer.update({name: _has(folder, *where) for name, where in HOOKS.items()})
    for name in ("verl", "vllm", "sglang"):
        try:
            answer["version" if name == "verl" else name] = md.version(name)
        except md.PackageNotFoundError:
            answer.setdefault(name, None)
    if answer.get("version") is None:  # a checkout on the path, not installed: its own file
        answer["version"] = _version_file(folder)
    return answer


def main(argv):
    if argv[0] == "locate":
        answer = locate()
    elif argv[0] == "build":
        answer = build(argv[1])
    elif argv[0] == "weights":
        answer = weights(argv[1], argv[2])
    else:
        raise SystemExit(f"unknown request {argv[0]!r}")
    print(MARK + json.dumps(answer))


if __name__ == "__main__":
    main(sys.argv[1:])
