"""Kernel stages of a `--locked` install, asked: the key the lockfile's env will have, and for
each locked kernel stage the query whose candidates (`kernels/choices`, the one list both routes
share) are only what the lockfile allows. The plan (`kernels.planning.plan_kernels`) and the run
(`lockinstall/kernelrun`) both ask it.
"""

from __future__ import annotations

from collections.abc import Mapping

from verl_bootstrap.kernels.host import KernelHost
from verl_bootstrap.kernels.kernelchoice import KernelQuery, LockPins
from verl_bootstrap.kernels.key import BuildKey
from verl_bootstrap.kernels.planning import cxx11_abi
from verl_bootstrap.lock.format import LockedDist, LockedStage, Lockfile
from verl_bootstrap.profile.kernel import KernelSpec

__all__ = ["kernel_dist", "locked_key", "locked_queries"]


def locked_key(lock: Lockfile, platform: str | None) -> BuildKey:
    """The key the env of `lock` will have (its torch, CUDA and Python; this host's platform)."""
    torch = lock.cuda.torch.split("+", 1)[0] if lock.cuda.torch else None
    cuda = lock.cuda.torch_cuda or ("cpu" if torch else None)
    major, minor = lock.python.split(".")[:2]
    return BuildKey(torch, cuda, cxx11_abi(torch), f"cp{major}{minor}", platform)


def kernel_dist(stage: LockedStage, kernel: KernelSpec) -> LockedDist | None:
    """The locked distribution of the kernel in `stage`."""
    return stage.find(kernel.distribution)


def locked_queries(
    lock: Lockfile, kernels: Mapping[str, KernelSpec], host: KernelHost, *, online: bool = True
) -> dict[str, KernelQuery]:
    """stage id -> query, for each locked stage the profile marks as a kernel stage (`online`:
    False under --offline or from a bundle, when no declared source is asked)."""
    key = locked_key(lock, host.platform)
    out = {}
    for stage in lock.stages:
        kernel = kernels.get(stage.id)
        dist = kernel_dist(stage, kernel) if kernel else None
        if kernel is not None and dist is not None:
            pins = LockPins(dist, stage, host.bundled, online)
            out[stage.id] = KernelQuery(kernel, dist.version, key, lock=pins)
    return out
