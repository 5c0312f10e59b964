"""Which CUDA a driver serves, and which GPUs a torch build's arch list runs on.

The driver rules follow NVIDIA's CUDA compatibility guide (minor-version compatibility): every
CUDA 13.x build runs on a driver of branch 580 or newer, every 12.x build on 525 or newer, every
11.x build on 450 or newer. Drivers are backward compatible, so a 580 driver also serves 12.x.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "CUDA_BY_BRANCH",
    "GPU_COMPUTE_CAPABILITY",
    "MIN_DRIVER_FOR_CUDA_MAJOR",
    "TORCH_ARCH_LISTS",
    "arch_supported",
    "cuda_for_driver",
    "driver_for_cuda",
    "driver_serves",
    "known_compute_capability",
    "max_cuda_major",
    "parse_cc",
    "planned_arch_list",
    "supports_bf16",
    "version_tuple",
]

# The lowest driver branch that runs every build of a CUDA major (minor-version compatibility).
MIN_DRIVER_FOR_CUDA_MAJOR: dict[int, int] = {13: 580, 12: 525, 11: 450}

# The CUDA version each driver branch reports (its UMD), as NVIDIA released them. The recorded
# outputs in tests/data/nvidia/ confirm 470→11.4, 515→11.7, 525→12.0, 535→12.2, 570→12.8,
# 590→13.1, 595→13.2 and 610→13.3.
CUDA_BY_BRANCH: tuple[tuple[int, str], ...] = (
    (450, "11.0"),
    (455, "11.1"),
    (460, "11.2"),
    (465, "11.3"),
    (470, "11.4"),
    (495, "11.5"),
    (510, "11.6"),
    (515, "11.7"),
    (520, "11.8"),
    (525, "12.0"),
    (530, "12.1"),
    (535, "12.2"),
    (545, "12.3"),
    (550, "12.4"),
    (555, "12.5"),
    (560, "12.6"),
    (565, "12.7"),
    (570, "12.8"),
    (575, "12.9"),
    (580, "13.0"),
    (590, "13.1"),
    (595, "13.2"),
    (610, "13.3"),
)

# TORCH_CUDA_ARCH_LIST of PyTorch's own wheels per platform and CUDA version (pytorch's binary
# build scripts; "+PTX" on the last entry adds compute_XY). The aarch64 (SBSA) wheels are built for
# the data-centre GPUs that sit beside Grace CPUs, from Ampere on. The installed torch's
# `torch.cuda.get_arch_list()` is authoritative; this table is the plan before any install.
TORCH_ARCH_LISTS: dict[str, dict[str, tuple[str, ...]]] = {
    "linux-64": {
        "11.8": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
        "12.1": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
        "12.4": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
        "12.6": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
        "12.8": ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
        "12.9": ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
        "13.0": ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"),
    },
    "linux-aarch64": {
        "12.6": ("sm_80", "sm_90"),
        "12.8": ("sm_80", "sm_90", "sm_100", "sm_120"),
        "12.9": ("sm_80", "sm_90", "sm_100", "sm_120"),
        "13.0": ("sm_80", "sm_90", "sm_100", "sm_110", "sm_120", "compute_120"),
    },
}

# Compute capability by the model in a GPU's name, for outputs that do not report it (the plain
# nvidia-smi table): NVIDIA's CUDA GPU table. Grace-Hopper (GH200) and Grace-Blackwell (GB200)
# superchips are aarch64 hosts; their GPUs are a Hopper and a Blackwell.
GPU_COMPUTE_CAPABILITY: dict[str, str] = {
    "A100": "8.0",
    "H100": "9.0",
    "H200": "9.0",
    "GH200": "9.0",
    "B200": "10.0",
    "GB200": "10.0",
}

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def version_tuple(version: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6); non-numeric parts end the tuple."""
    parts: list[int] = []
    for piece in version.strip().split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def _cuda_major(cuda: str) -> int | None:
    numbers = version_tuple(cuda)
    return numbers[0] if numbers else None


def max_cuda_major(driver_version: str) -> int | None:
    """The newest CUDA major version a driver runs, or None below the 450 branch."""
    branch = version_tuple(driver_version)[:1]
    if not branch:
        return None
    for major, minimum in sorted(MIN_DRIVER_FOR_CUDA_MAJOR.items(), reverse=True):
        if branch[0] >= minimum:
            return major
    return None


def driver_serves(driver_version: str, cuda: str) -> bool:
    """Whether a driver runs wheels built for `cuda` ('12.8'), by minor-version compatibility."""
    major = _cuda_major(cuda)
    newest = max_cuda_major(driver_version)
    if major is None or newest is None:
        return False
    return major in MIN_DRIVER_FOR_CUDA_MAJOR and major <= newest


def cuda_for_driver(driver_version: str) -> str | None:
    """The CUDA version a driver branch reports; a branch newer than the table gets the newest."""
    branch = version_tuple(driver_version)[:1]
    found: str | None = None
    for first, cuda in CUDA_BY_BRANCH:
        if branch and branch[0] >= first:
            found = cuda
    return found


def driver_for_cuda(cuda: str) -> str | None:
    """The first driver branch that reports `cuda` (or a newer minor of its major)."""
    wanted = version_tuple(cuda)[:2]
    for branch, reported in CUDA_BY_BRANCH:
        got = version_tuple(reported)
        if got[0] == wanted[0] and got >= wanted:
            return str(branch)
    return None


def parse_cc(compute_capability: str) -> tuple[int, int] | None:
    """'8.6' -> (8, 6); None when it is not a compute capability."""
    numbers = version_tuple(compute_capability)
    if len(numbers) != 2:
        return None
    return numbers[0], numbers[1]


def _entry_runs(entry: str, cc: tuple[int, int]) -> bool:
    match = _ARCH.match(entry.strip().lower())
    if not match:
        return False
    kind, major, minor, suffix = match[1], int(match[2]), int(match[3]), match[4]
    if kind == "compute":
        return cc >= (major, minor)  # PTX is JIT-compiled forward onto any newer GPU
    if suffix == "a":
        return cc == (major, minor)  # arch-specific cubins run on that exact GPU only
    return cc[0] == major and cc[1] >= minor  # cubins run within one major, on minor >= theirs


def arch_supported(compute_capability: str, arch_list: Sequence[str]) -> bool:
    """Whether a GPU of this compute capability runs a build with this torch arch list."""
    cc = parse_cc(compute_capability)
    return cc is not None and any(_entry_runs(entry, cc) for entry in arch_list)


def supports_bf16(compute_capability: str) -> bool:
    """bf16 tensor-core math needs Ampere (compute capability 8.0) or newer."""
    cc = parse_cc(compute_capability)
    return cc is not None and cc >= (8, 0)


def planned_arch_list(cuda: str | None, platform: str = "linux-64") -> tuple[str, ...] | None:
    """The arch list of PyTorch's wheels for this platform and CUDA (major.minor), if known."""
    if not cuda:
        return None
    numbers = version_tuple(cuda)[:2]
    return TORCH_ARCH_LISTS.get(platform, {}).get(".".join(str(n) for n in numbers))


def known_compute_capability(name: str) -> str | None:
    """The compute capability the GPU's model name implies ('NVIDIA GH200 480GB' -> '9.0')."""
    words = re.split(r"[\s-]+", name.upper())
    return next((GPU_COMPUTE_CAPABILITY[w] for w in words if w in GPU_COMPUTE_CAPABILITY), None)
