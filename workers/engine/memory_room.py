"""Room on the device for a stage that ran out of it: give back what a rank keeps between jobs, run again.

NOTE [memory room]: a worker keeps its text encoder resident between jobs (the next prompt encodes
without a reload), beside the transformer. Natively ComfyUI's model management unloads whatever the
next stage needs room for (VAEDecodeTiled asks load_models_gpu for its decode's memory), so the LTX-2.3
t2v template's decode fits one 80 GB card natively, while a worker holding the 22B fp8 transformer
and Gemma 3 12B ran out of memory in its first tile (H100, bench_e2e). A stage that fails for device
memory (an InputRejected naming it, raised alike on every rank at a unit boundary) therefore gives back
the rank's resident text encoders and runs once more; the next text encode reloads them. The decision
is the same on every rank: every rank keeps the same records of what is resident.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TypeVar

import torch

from .protocol import InputRejected

T = TypeVar("T")
OUT_OF_MEMORY = "out of memory"  # torch.cuda.OutOfMemoryError's message, carried in the agreed error


def with_room(
    run: Callable[[], T], release: Callable[[], list[str]], device: torch.device
) -> tuple[T, list[str]]:
    """(run(), what was given back). When run() fails for device memory and release() gives something
    back (names of what went), run() once more; any other error, or nothing to give back, is raised."""
    try:
        return run(), []
    except InputRejected as exc:
        if OUT_OF_MEMORY not in str(exc).lower():
            raise
        failure = exc
    released = release()
    if not released:
        raise failure
    del failure  # its traceback holds the failed attempt's tensors
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return run(), released
