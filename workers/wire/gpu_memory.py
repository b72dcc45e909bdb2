"""How much of its GPU a worker may use: all of it, or at most LTX2_MGPU_GPU_MEMORY_GIB.

NOTE [gpu memory cap]: with the variable set, every GPU worker is held to that many GiB by torch's
per-process memory fraction (its caching allocator refuses to grow past it), and everything that
sizes work by free memory sees the cap instead of the card: the loader's pre-flight (the plan and its
refusals), the text encoder's replicas-or-layers rule, `offloaded`'s budget, and ComfyUI's own model
management inside the workers (engine/comfy/bootstrap.py). Users set it to leave room on GPUs that
other programs share (ComfyUI's own models on GPU 0); benches set it to run a 16 GB card's placement
on a larger one (bench/bench_e2e.py --ours layers@16).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

GPU_MEMORY_ENV = "LTX2_MGPU_GPU_MEMORY_GIB"
GIB = 2**30


def cap_bytes(environ: Mapping[str, str] = os.environ) -> int | None:
    """The cap per GPU worker in bytes, None when unset; ValueError naming the variable for a bad value."""
    raw = environ.get(GPU_MEMORY_ENV, "").strip()
    if not raw:
        return None
    try:
        gib = float(raw)
    except ValueError:
        gib = math.nan
    if not (math.isfinite(gib) and gib > 0):
        raise ValueError(
            f"{GPU_MEMORY_ENV}={raw!r} is not a number of GiB; set it to the most GPU memory each worker may "
            f"use (for example {GPU_MEMORY_ENV}=16), or unset it to let workers use their whole GPU"
        )
    return int(gib * GIB)


def capped_total(total_bytes: int, environ: Mapping[str, str] = os.environ) -> int:
    """A GPU's memory as a worker may use it: its total, or the cap when smaller."""
    cap = cap_bytes(environ)
    return total_bytes if cap is None else min(total_bytes, cap)


def apply_cap(device) -> int | None:
    """In a worker, before it allocates: hold this process to the cap on its CUDA `device`. Returns the
    bytes it may use there, None when uncapped (or not a GPU)."""
    import torch

    cap = cap_bytes()
    if cap is None or device.type != "cuda":
        return None
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), device)
    return min(cap, total)


def process_limit_bytes(device) -> int:
    """The most this process may hold on CUDA `device`: its memory fraction of the card (torch >= 2.6
    reports it; older torch is taken as uncapped)."""
    import torch

    total = torch.cuda.get_device_properties(device).total_memory
    get_fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    return int(total * (get_fraction(device) if get_fraction is not None else 1.0))


def allocatable_bytes(device) -> int:
    """What this process may still allocate on CUDA `device`: the card's free memory plus what torch
    holds cached and unused, no more than its memory fraction leaves above what it holds."""
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    allocated = torch.cuda.memory_allocated(device)
    cached = torch.cuda.memory_reserved(device) - allocated
    return max(0, min(free + cached, process_limit_bytes(device) - allocated))
