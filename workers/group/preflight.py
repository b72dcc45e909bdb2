"""The loader's pre-flight on the UI side: the GPUs' sizes, the plan (wire/memory_plan.py) on the
console, and the refusal before any worker starts when the chosen weights option does not fit."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..wire.config import SHM_DIR
from ..wire.gpu_memory import cap_bytes, capped_total
from ..wire.job_memory import Capacity
from ..wire.memory_plan import PreFlight, activation_bytes, check_host, check_plan, model_sizes, plan
from . import console


def gpu_capacities(devices: Sequence[str]) -> list[int | None]:
    """Total memory of each CUDA device in bytes, or the workers' cap when smaller (NOTE [gpu memory
    cap]); None for CPU workers. Reads the device properties only: no CUDA context is made on the GPUs
    in this process."""
    cap_bytes()  # a bad LTX2_MGPU_GPU_MEMORY_GIB is refused for any group, before a worker starts
    out: list[int | None] = []
    for device in devices:
        if not device.startswith("cuda"):
            out.append(None)
            continue
        import torch

        index = int(device.split(":", 1)[1]) if ":" in device else 0
        out.append(capped_total(int(torch.cuda.get_device_properties(index).total_memory)))
    return out


def available_host_bytes() -> int | None:
    """The host's available memory (MemAvailable in /proc/meminfo: free plus reclaimable cache), bytes;
    None where it cannot be read (not Linux)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kB
    except OSError:
        return None
    return None


def shm_free_bytes() -> int:
    """Free bytes of the shared-memory filesystem the jobs' tensors live in."""
    stats = os.statvfs(SHM_DIR)
    return stats.f_bavail * stats.f_frsize


def machine_capacity(devices: Sequence[str]) -> Capacity:
    """What the machine has for a job on `devices` (wire/job_memory.py)."""
    return Capacity(shm_free_bytes(), available_host_bytes(), tuple(devices), gpu_capacities(devices))


def preflight(
    shapes: Mapping[str, Sequence[int]],
    dtypes: Mapping[str, str],
    devices: Sequence[str],
    weights: str,
    max_video_tokens: int,
    weight_dtype: str,
    capacities: Sequence[int | None] | None = None,
    host_available: int | None = -1,
) -> tuple[PreFlight, int]:
    """Print the plan as one console block; ValueError (what to change) when `weights` does not fit the
    GPUs or the host memory (`host_available` bytes; -1 reads the host's, None skips that check).
    Returns the plan and the bytes an offloaded GPU must keep free for the step (activations, runtime)."""
    sizes = model_sizes(shapes, dtypes, weight_dtype)
    capacities = gpu_capacities(devices) if capacities is None else capacities
    found = plan(sizes, devices, capacities, weights, max_video_tokens, weight_dtype)
    console.info(found.console_block())
    check_plan(found, sizes, weight_dtype)
    check_host(found, sizes, available_host_bytes() if host_available == -1 else host_available)
    need = max(found.needs[weights], key=lambda n: n.total_bytes)
    reserve = activation_bytes(sizes, max_video_tokens, len(devices), weight_dtype) + need.runtime_bytes
    return found, reserve
