"""Probe run inside a target env's interpreter: which CUDA libraries torch really loads.

Standalone and stdlib-only: it must run under whatever Python the env has. It imports torch (and
TransformerEngine when installed), touches cuDNN and NCCL when a GPU is there, then reads
/proc/self/maps and prints one JSON object on stdout. Failures are recorded, never raised.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

SCHEMA = "verl-bootstrap.probe-libs/1"
WATCHED = ("libcudnn", "libnccl", "libcublas", "libcudart")


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _torch_facts(torch: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"version": str(torch.__version__), "cuda": torch.version.cuda}
    cudnn = importlib.import_module("torch.backends.cudnn")
    facts["cudnn"] = cudnn.version() if callable(getattr(cudnn, "version", None)) else None
    facts["arch_list"] = list(torch.cuda.get_arch_list())
    facts["cuda_available"] = bool(torch.cuda.is_available())
    facts["device_count"] = int(torch.cuda.device_count()) if facts["cuda_available"] else 0
    return facts


def _touch_cudnn(torch: Any) -> str:
    """A tiny convolution: the first cuDNN call is where a shadowing cuDNN crashes."""
    try:
        image = torch.ones(1, 1, 8, 8, device="cuda")
        kernel = torch.ones(1, 1, 3, 3, device="cuda")
        torch.nn.functional.conv2d(image, kernel)
        torch.cuda.synchronize()
    except Exception as exc:  # every failure is the finding
        return _error(exc)
    return "ok"


def _touch_nccl() -> Any:
    """NCCL's version: a tuple (2, 28, 9) in recent torch, an int (2708) in older releases."""
    try:
        version = importlib.import_module("torch.cuda.nccl").version()
    except Exception as exc:  # every failure is the finding
        return _error(exc)
    return list(version) if isinstance(version, tuple) else version


def probe_torch() -> tuple[dict[str, Any], dict[str, Any]]:
    """Import torch; when a GPU is there, touch cuDNN and NCCL."""
    try:
        torch = importlib.import_module("torch")
        facts = _torch_facts(torch)
    except BaseException as exc:  # an import can die in native code setup: record it
        return {"error": _error(exc)}, {}
    if not facts["cuda_available"]:
        return facts, {}
    return facts, {"cudnn": _touch_cudnn(torch), "nccl": _touch_nccl()}


def probe_transformer_engine() -> dict[str, Any]:
    """Import TransformerEngine when it is installed (it loads its own cuDNN)."""
    if importlib.util.find_spec("transformer_engine") is None:
        return {"installed": False}
    try:
        module = importlib.import_module("transformer_engine")
    except BaseException as exc:  # record, never raise
        return {"installed": True, "error": _error(exc)}
    return {"installed": True, "version": str(getattr(module, "__version__", "unknown"))}


def loaded_libraries() -> tuple[list[str], str | None]:
    """The watched libraries' files mapped into this process, in first-seen order."""
    try:
        lines = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return [], _error(exc)
    paths: list[str] = []
    for line in lines:
        fields = line.split(maxsplit=5)
        path = fields[5] if len(fields) == 6 else ""
        name = Path(path).name
        watched = name.startswith(WATCHED) and ".so" in name
        if path.startswith("/") and watched and path not in paths:
            paths.append(path)
    return paths, None


def main() -> int:
    """Print the probe's JSON answer."""
    # Imports may print; keep stdout for the one JSON line the caller parses.
    with contextlib.redirect_stdout(sys.stderr):
        torch, touched = probe_torch()
        engine = probe_transformer_engine()
    maps, maps_error = loaded_libraries()
    answer = {
        "schema": SCHEMA,
        "python": ".".join(str(n) for n in sys.version_info[:3]),
        "prefix": sys.prefix,
        "executable": sys.executable,
        "torch": torch,
        "transformer_engine": engine,
        "touched": touched,
        "maps": maps,
        "maps_error": maps_error,
    }
    print(json.dumps(answer, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
