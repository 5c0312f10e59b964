"""Probe run inside a target env's interpreter: the build key a compiled extension must match.

Standalone: the standard library, plus torch when the env has it. Prints one JSON object on stdout
(torch's version and CUDA, its C++11 ABI flag, the Python tag and the platform). Never raises.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from typing import Any

SCHEMA = "verl-bootstrap.probe-build-key/1"


def _torch_facts() -> dict[str, Any]:
    try:
        import torch
    except Exception as exc:
        return {"torch": None, "torch_error": f"{type(exc).__name__}: {exc}"}
    version = str(torch.__version__).split("+", 1)[0]
    return {
        "torch": version,
        "cuda": torch.version.cuda or "cpu",
        "cxx11abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    }


def main() -> None:
    """Print the key as JSON."""
    answer: dict[str, Any] = {
        "schema": SCHEMA,
        "python": f"cp{sys.version_info.major}{sys.version_info.minor}",
        "platform": sysconfig.get_platform().replace("-", "_").replace(".", "_"),
    }
    answer.update(_torch_facts())
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
