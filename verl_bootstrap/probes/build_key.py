"""Probe run inside a target env's interpreter: the build key a compiled extension must match.

Standalone and stdlib-only. Prints one JSON object on stdout (torch's version and CUDA, its C++11
ABI flag, the Python tag and the platform); never raises. torch is not imported where it can be
avoided (a CUDA torch takes seconds to import): its version and CUDA come from torch/version.py,
and its ABI from the mangled names in libc10.so (the C++11 ABI's std::string is
`std::__cxx11::basic_string`); a torch laid out otherwise is imported.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import sysconfig
from pathlib import Path
from typing import Any

SCHEMA = "verl-bootstrap.probe-build-key/1"
CXX11_MARK = b"St7__cxx11"


def _read_version(folder: Path) -> dict[str, Any] | None:
    spec = importlib.util.spec_from_file_location("_torch_version", folder / "version.py")
    libc10 = folder / "lib" / "libc10.so"
    if spec is None or spec.loader is None or not libc10.is_file():
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {
        "torch": str(module.__version__).split("+", 1)[0],
        "cuda": module.cuda or "cpu",
        "cxx11abi": CXX11_MARK in libc10.read_bytes(),
    }


def _imported() -> dict[str, Any]:
    import torch

    return {
        "torch": str(torch.__version__).split("+", 1)[0],
        "cuda": torch.version.cuda or "cpu",
        "cxx11abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    }


def _torch_facts() -> dict[str, Any]:
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return {"torch": None}
        folder = Path(next(iter(spec.submodule_search_locations)))
        return _read_version(folder) or _imported()
    except Exception as exc:
        return {"torch": None, "torch_error": f"{type(exc).__name__}: {exc}"}


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
