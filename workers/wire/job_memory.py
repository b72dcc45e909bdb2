"""A job's memory, checked before anything is allocated: what it will take against what the machine has.

The estimates come from the job's plan (strategies/vae_memory.py for the VAE jobs, text/prompt_memory.py
for a prompt); this module only compares. Three places a job takes memory:
- shared memory (/dev/shm): the inputs copied in and the outputs the workers write (the UI process
  owns them, NOTE [shm lifetime] in shm.py); on the host.
- each worker's own memory for the job (activations, copies of its part): host RAM for a CPU worker,
  the GPU for a GPU worker;
- a CPU worker's share counts once per CPU worker against the host's available memory, together
  with the shared memory.
Refused with ValueError naming the figures and the input to lower. Estimates, not measurements: each
constant behind them says where it came from; the checks leave room for them to be off by the
MARGIN below rather than refuse a job that would run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .memory_plan import gib

# An estimate may be this much above the job's real peak before a job that fits is refused: the
# estimates were within 0.6-1.3x of measured CPU peaks (tiny model, strategies/vae_memory.py).
MARGIN = 1.25


@dataclass(frozen=True)
class JobNeed:
    """What one job takes, bytes. `what`: the job in words; `lower`: the inputs that shrink it."""

    what: str
    lower: str
    shared_bytes: int
    worker_bytes: int  # per worker, the busiest one
    resident_bytes: int = 0  # per GPU worker, weights the job needs there besides (a text encoder's share)


@dataclass(frozen=True)
class Capacity:
    """What the machine has for a job: free /dev/shm, available host memory (None: unknown), and per
    worker its GPU's memory (None for a CPU worker)."""

    shm_free_bytes: int
    host_available_bytes: int | None
    devices: Sequence[str]
    gpu_bytes: Sequence[int | None]


def check_need(need: JobNeed, capacity: Capacity) -> None:
    """ValueError when `need` does not fit `capacity` (with MARGIN for the estimate)."""
    if need.shared_bytes > capacity.shm_free_bytes:
        raise ValueError(
            f"{need.what} needs {gib(need.shared_bytes)} of shared memory (/dev/shm) but {gib(capacity.shm_free_bytes)} "
            f"is free. Lower {need.lower}, or enlarge /dev/shm (Docker: --shm-size)"
        )
    cpu_workers = sum(1 for gpu in capacity.gpu_bytes if gpu is None)
    host = need.shared_bytes + cpu_workers * need.worker_bytes
    if capacity.host_available_bytes is not None and host > capacity.host_available_bytes * MARGIN:
        workers = f" + {gib(need.worker_bytes)} in each of {cpu_workers} CPU workers" if cpu_workers else ""
        raise ValueError(
            f"{need.what} needs about {gib(host)} of host memory ({gib(need.shared_bytes)} shared{workers}) but "
            f"{gib(capacity.host_available_bytes)} is available. Lower {need.lower}, or free host memory"
        )
    on_gpu = need.worker_bytes + need.resident_bytes
    for device, gpu in zip(capacity.devices, capacity.gpu_bytes):
        if gpu is not None and on_gpu > gpu * MARGIN:
            weights = f" (with {gib(need.resident_bytes)} of weights)" if need.resident_bytes else ""
            raise ValueError(
                f"{need.what} needs about {gib(on_gpu)} on {device}{weights} but it has {gib(gpu)} in all. "
                f"Lower {need.lower}, or use more GPUs"
            )
