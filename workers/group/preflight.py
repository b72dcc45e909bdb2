"""The loader's pre-flight on the UI side: the GPUs' sizes, the plan (wire/memory_plan.py) on the
console, and the refusal before any worker starts when the chosen weights option does not fit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..wire.memory_plan import PreFlight, activation_bytes, check_plan, model_sizes, plan
from . import console


def gpu_capacities(devices: Sequence[str]) -> list[int | None]:
    """Total memory of each CUDA device in bytes (None for CPU workers). Reads the device properties
    only: no CUDA context is made on the GPUs in this process."""
    out: list[int | None] = []
    for device in devices:
        if not device.startswith("cuda"):
            out.append(None)
            continue
        import torch

        index = int(device.split(":", 1)[1]) if ":" in device else 0
        out.append(int(torch.cuda.get_device_properties(index).total_memory))
    return out


def preflight(
    shapes: Mapping[str, Sequence[int]],
    dtypes: Mapping[str, str],
    devices: Sequence[str],
    weights: str,
    max_video_tokens: int,
    weight_dtype: str,
    capacities: Sequence[int | None] | None = None,
) -> tuple[PreFlight, int]:
    """Print the plan as one console block; ValueError (what to change) when `weights` does not fit.
    Returns the plan and the bytes an offloaded GPU must keep free for the step (activations, runtime)."""
    sizes = model_sizes(shapes, dtypes, weight_dtype)
    capacities = gpu_capacities(devices) if capacities is None else capacities
    found = plan(sizes, devices, capacities, weights, max_video_tokens, weight_dtype)
    console.info(found.console_block())
    check_plan(found, sizes, weight_dtype)
    need = max(found.needs[weights], key=lambda n: n.total_bytes)
    reserve = activation_bytes(sizes, max_video_tokens, len(devices), weight_dtype) + need.runtime_bytes
    return found, reserve
