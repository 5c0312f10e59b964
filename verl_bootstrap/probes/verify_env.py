"""Runs INSIDE the target env's interpreter: imports, versions, and the GPU smoke test.

Standard library only (the env may have nothing else); answers with one JSON object on stdout.
Usage: python verify_env.py '<json request>'
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import os
import sys
import time
import traceback


def _import(name):
    started = time.monotonic()
    try:
        module = importlib.import_module(name)
    except BaseException as exc:  # an import can raise anything, even SystemExit
        error = f"{type(exc).__name__}: {exc}"
        return {"module": name, "ok": False, "error": error, "triton_stub": _triton_stub()}
    took = round(time.monotonic() - started, 2)
    return {"module": name, "ok": True, "file": getattr(module, "__file__", None), "seconds": took}


def _import_name(name):
    """`module`, or `module:name`: a name verl imports from that module inside a function."""
    module, _, attr = name.partition(":")
    item = dict(_import(module), module=name)
    if not attr or not item["ok"] or hasattr(sys.modules[module], attr):
        return item
    error = f"ImportError: cannot import name {attr!r} from {module!r}"
    return {"module": name, "ok": False, "error": error, "triton_stub": False}


def _release(text):
    """The leading numbers of a version ('0.10.0.dev1' -> (0, 10, 0))."""
    numbers = []
    for piece in text.split(".")[:3]:
        digits = piece[: len(piece) - len(piece.lstrip("0123456789"))]
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def _backend(asked):
    """What verl runs for the profile's backends; for a verl older than the release they were
    read from, each is named as skipped (that release may lay its modules out otherwise)."""
    names = asked.get("imports", [])
    try:
        have = md.version("verl")
    except md.PackageNotFoundError:
        have = None
    if names and have is not None and _release(have) < _release(asked["since"]):
        why = f"verl {have} is older than {asked['since']}, whose modules these are"
        return [{"module": n, "ok": None, "skipped": why} for n in names]
    return [_import_name(n) for n in names]


def _triton_stub():
    """True when vLLM handed out its stand-in for Triton (vllm.triton_utils.tl): it does so when
    no GPU driver is active, and code that uses Triton at import time then fails for that alone."""
    utils = sys.modules.get("vllm.triton_utils")
    return type(getattr(utils, "tl", None)).__name__ == "TritonLanguagePlaceholder"


def _versions(names):
    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _tiny_forward(torch, flash_attn):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:  # a bare PyTorch env: a torch-only transformer block proves bf16 too
        return _torch_block_forward(torch)

    config = LlamaConfig(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
    )
    impl = "flash_attention_2" if flash_attn else "sdpa"
    model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
    model.config._attn_implementation = impl
    ids = torch.randint(0, 256, (2, 16), device="cuda")
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    return bool(torch.isfinite(logits.float()).all()), impl


def _torch_block_forward(torch):
    layer = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, batch_first=True)
    layer = layer.to(device="cuda", dtype=torch.bfloat16).eval()
    x = torch.randn(2, 16, 128, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        y = layer(x)
    return bool(torch.isfinite(y.float()).all()), "torch TransformerEncoderLayer"


def _gpu(request):
    if not request.get("gpu_present"):
        return {"status": "skipped", "detail": "skipped: no NVIDIA driver"}
    try:
        import torch
    except BaseException as exc:
        return {"status": "fail", "detail": f"torch does not import: {exc}"}
    if not torch.cuda.is_available():
        return {"status": "fail", "detail": "torch.cuda.is_available() is False on a GPU host"}
    try:
        return _gpu_checks(torch, request)
    except BaseException:
        return {"status": "fail", "detail": traceback.format_exc(limit=3)}


def _gpu_checks(torch, request):
    name = torch.cuda.get_device_name(0)
    cc = "%d.%d" % torch.cuda.get_device_capability(0)
    detail = {"device": name, "compute_capability": cc, "count": torch.cuda.device_count()}
    if request.get("bf16") and not torch.cuda.is_bf16_supported():
        return {"status": "fail", "detail": f"{name} (cc {cc}) has no bf16", **detail}
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    finite = bool(torch.isfinite((a @ a).float()).all())
    forward, impl = _tiny_forward(torch, request.get("flash_attn", False))
    ok = finite and forward
    status = "ok" if ok else "fail"
    return {
        "status": status,
        "detail": f"bf16 matmul and a tiny Llama forward ({impl}) on {name}",
        "matmul_finite": finite,
        "forward_finite": forward,
        **detail,
    }


def main():
    request = json.loads(sys.argv[1])
    result = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "imports": [_import(m) for m in request.get("imports", [])],
        "versions": _versions(request.get("versions", [])),
        "backend": _backend(request.get("backend") or {}),
    }
    result["gpu"] = (
        _gpu(request)
        if request.get("gpu_smoke", True)
        else {"status": "skipped", "detail": "skipped: the profile asks for no GPU smoke test"}
    )
    sys.stdout.write("\n@@VERIFY@@" + json.dumps(result) + "\n")


def _leave():
    """Exit without the interpreter's shutdown: after verl, torch and ray are imported it takes
    over a second (their finalizers and module teardown), and the probe has nothing left to clean
    up (its bytecode was written at import time, a CUDA context goes with the process)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
    _leave()
