"""Where a text encoder's layers go over a worker group: the replicas-or-layers rule and the layer
blocks, sized by each rank's free memory (rank/ops_text.py for Gemma 3, ComfyUI's engine for Gemma 4).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist

from ..wire.gpu_memory import process_limit_bytes

# "auto" picks replicas when weights x this fit each rank's free memory. Measured on an H200 with
# Gemma 3 12B in bf16 (bench/bench_text_encode.py): 22.0 GiB of weights, peak 27.0 GiB (1.23x) for a
# 2,048-token prompt (float32 hidden states, per-matmul float32 weight casts, attention); 1.4 leaves
# room for prompts of about 4,000 tokens.
REPLICA_HEADROOM = 1.4


def free_bytes(job: Any) -> list[tuple[str, int]]:
    """(device, free bytes for this rank) of every rank; collective over `job`'s control group (an
    engine Job: rank, world_size, device, control_group). Ranks sharing a device (or the host's
    memory, for CPU ranks) split its free memory evenly; a GPU rank gets no more than its memory
    cap leaves it."""
    device = job.device
    own = None  # a GPU rank's room under its own memory cap (NOTE [gpu memory cap])
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        own = process_limit_bytes(device) - torch.cuda.memory_allocated(device)
    else:
        free = _host_available_bytes()
    mine = (str(device) if device.type == "cuda" else "cpu", int(free), own)
    everyone: list = [mine]
    if job.world_size > 1:
        everyone = [None] * job.world_size
        dist.all_gather_object(everyone, mine, group=job.control_group)
    sharing = {d: sum(1 for other, _, _ in everyone if other == d) for d, _, _ in everyone}
    return [(d, f // sharing[d] if room is None else min(f // sharing[d], room)) for d, f, room in everyone]


def _host_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def split_layers(num_layers: int, capacities: list[int]) -> tuple[tuple[int, int], ...]:
    """Contiguous blocks [start, stop), one per rank in rank order, sized in proportion to
    `capacities` (bytes each rank can give to layers), at least one layer each."""
    world = len(capacities)
    total = sum(max(c, 0) for c in capacities)
    shares = [num_layers * max(c, 0) / total if total > 0 else num_layers / world for c in capacities]
    counts = [max(1, int(s)) for s in shares]
    order = sorted(range(world), key=lambda r: (-(shares[r] - int(shares[r])), r))
    i = 0
    while sum(counts) != num_layers:
        r = order[i % world]
        if sum(counts) < num_layers:
            counts[r] += 1
        elif counts[r] > 1:
            counts[r] -= 1
        i += 1
    starts = [sum(counts[:r]) for r in range(world)]
    return tuple((s, s + c) for s, c in zip(starts, counts))
