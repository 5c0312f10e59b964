"""Why a test of verl's own suite failed: a pure rule table over pytest's failure text.

Classes:
- `gpu`: needs a GPU, its driver, or a GPU-only package a CPU env does not carry (vLLM,
  flash-attn, ...). Reported; expected on a host or env without them.
- `download`: needs a model or dataset from the network (the hub, the files verl's CPU workflow
  downloads before its tests). Reported; expected offline.
- `env`: the env itself is wrong: a module it should have is missing, or an installed version
  does not fit (a name that cannot be imported, a version conflict, an ABI mismatch). Fails the
  command.
- `timeout`: ran past its time limit (the run's `--timeout`, where the run was stopped, or a
  test's own `--test-timeout`). Reported, never hidden; a stopped run does not pass.
- `other`: none of the above (an assertion, a test's own bug). Reported.

The rules look only at the exception lines of the failure (pytest's `E   ` lines, or the message
when there are none): code lines in a traceback often mention CUDA without being the cause.
The first rule that matches wins, so the specific rules come before the general ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CLASSES",
    "RULES",
    "Rule",
    "Verdict",
    "classify",
    "evidence",
    "interrupted_here",
    "stopped_at_time_limit",
]

CLASSES = ("env", "download", "gpu", "timeout", "other")

# Import names of packages that exist only for GPU stacks: a CPU env does not install them.
GPU_ONLY_MODULES = (
    "vllm",
    "sglang",
    "sgl_kernel",
    "flash_attn",
    "flash_attn_2_cuda",
    "flash_attn_interface",
    "transformer_engine",
    "apex",
    "deep_ep",
    "flashinfer",
    "liger_kernel",
    "cupy",
    "mbridge",
    "megatron.bridge",
    "tensorrt_llm",
    "torch_memory_saver",
    "nvidia",
    "pynvml",
)
_GPU_MODULE = "|".join(re.escape(m) for m in GPU_ONLY_MODULES)


@dataclass(frozen=True)
class Rule:
    """One row of the table: a pattern over the exception lines, and what it means."""

    name: str
    cls: str
    pattern: re.Pattern[str]
    reason: str


def _rule(name: str, cls: str, pattern: str, reason: str) -> Rule:
    return Rule(name, cls, re.compile(pattern, re.IGNORECASE), reason)


RULES: tuple[Rule, ...] = (
    _rule(
        "time-limit",
        "timeout",
        r"Timeout \(>[\d.]+s\)",
        "ran past its time limit; what it was doing is in the log",
    ),
    _rule(
        "gpu-package",
        "gpu",
        rf"No module named '(?:{_GPU_MODULE})(?:[.'])",
        "imports a GPU-only package, which a CPU env does not install",
    ),
    _rule(
        "engine-absent",
        "gpu",
        r"vllm version \S+ not supported|SGLang also not Found",
        "verl's rollout code refuses to load without vLLM or SGLang (GPU-only engines)",
    ),
    _rule(
        "missing-module",
        "env",
        r"No module named '([A-Za-z0-9_.]+)'",
        "imports a module the env lacks",
    ),
    _rule(
        "cannot-import-name",
        "env",
        r"cannot import name '[^']+' from",
        "an installed package lacks a name verl imports (a version mismatch)",
    ),
    _rule(
        "version-conflict",
        "env",
        r"VersionConflict|DistributionNotFound|is required for a normal functioning|"
        r"requires? [A-Za-z0-9_.-]+ ?[<>=!~]=?[^,\s]+, but (?:you have|found)",
        "an installed version does not fit what another package needs",
    ),
    _rule(
        "abi",
        "env",
        r"undefined symbol",
        "a compiled extension does not match the installed torch (ABI)",
    ),
    _rule(
        "cuda",
        "gpu",
        r"Torch not compiled with CUDA|CUDA driver|libcuda|libnvidia|no CUDA-capable|"
        r"Found no NVIDIA driver|No CUDA GPUs|CUDA error|CUDA is not available|cudaGet|"
        r"\bNCCL\b|ProcessGroupNCCL|nvidia-smi|\d+ active drivers|device_count\(\) *(?:==|is) *0|"
        r"'GPU': ",
        "needs a GPU or the NVIDIA driver",
    ),
    _rule(
        "hub-offline",
        "download",
        r"LocalEntryNotFoundError|OfflineModeIsEnabled|HF_HUB_OFFLINE|HF_DATASETS_OFFLINE|"
        r"couldn't connect to '?https?://|Cannot find the requested files in the (?:local|disk)|"
        r"is not a local folder and is not a valid model identifier|"
        r"outgoing traffic has been disabled|Couldn't reach|DatasetNotFoundError|"
        r"Can't load (?:the )?(?:tokenizer|config|configuration|model)",
        "needs a model or dataset from the hub",
    ),
    _rule(
        "network",
        "download",
        r"Max retries exceeded|NameResolutionError|Failed to resolve|Name or service not known|"
        r"Temporary failure in name resolution|Network is unreachable|ConnectTimeout|"
        r"ConnectionError|urlopen error|Connection refused",
        "needs the network (a download)",
    ),
    _rule(
        "downloaded-files",
        "download",
        # transformers 5 takes a local model path that is not there for a hub repo id
        r"(?:FileNotFoundError|No such file or directory|does not exist|"
        r"Repo id must be in the form).*"
        r"(?:/models/|hf_data|verl-data|\.parquet|data/gsm8k|geometry3k)",
        "needs a model or dataset that verl's CPU workflow downloads before its tests",
    ),
    _rule(
        "interrupted",
        "other",
        r"^Interrupted: pytest was stopped here",
        "the run was interrupted here, before it finished; run it again",
    ),
    _rule(
        "ray-startup",
        "other",
        r"node timed out during startup|GCS has become overloaded",
        "Ray's local node did not start in time (an overloaded host); re-run those files",
    ),
    _rule("import-error", "env", r"\bImportError\b", "an import fails in the env"),
)


def interrupted_here() -> str:
    """The failure message of the test a run was interrupted in (the rule above matches it)."""
    return "Interrupted: pytest was stopped here before the run finished (a signal or Ctrl-C)"


def stopped_at_time_limit(seconds: float) -> str:
    """The failure message of the file or test a run was stopped in (the rule above matches it)."""
    return f"Timeout (>{seconds:g}s): the run was stopped here at its time limit (--timeout)"


@dataclass(frozen=True)
class Verdict:
    """The class of one failure, the rule that decided it, and the line it matched."""

    cls: str
    rule: str
    reason: str
    line: str


def evidence(message: str, text: str) -> list[str]:
    """The exception lines of a failure: pytest's `E   ` lines, else the message and last line."""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    if lines:
        return [message.strip(), *lines] if message.strip() else lines
    last = [ln.strip() for ln in text.splitlines() if ln.strip()][-1:]
    return [s for s in (message.strip(), *last) if s]


def classify(message: str, text: str) -> Verdict:
    """The first rule that matches an exception line; `other` when none does."""
    lines = evidence(message, text)
    for rule in RULES:
        for line in lines:
            if rule.pattern.search(line):
                return Verdict(rule.cls, rule.name, rule.reason, line[:300])
    first = lines[0][:300] if lines else ""
    return Verdict("other", "none", "a test failure no rule explains", first)
