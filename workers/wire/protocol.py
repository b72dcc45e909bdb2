"""The control protocol between the UI process (client) and the workers.

Messages are plain dicts of builtins (str, int, float, bool, None, bytes, list, tuple, dict). They are
pickled for transport and unpickled with an unpickler that refuses every global, so a message can
never construct an object: the pack is imported under different module names in ComfyUI and in
workers, and a peer that got past the auth key still cannot run code through the channel.
Tensors never travel here, only `TensorSpec` dicts naming shared-memory segments (see shm.py).

Message kinds (all carry "kind"):
  hello     worker -> client   rank, pid, device
  ready     worker -> client   rank, backend, info (after the process group is up)
  request   client -> worker   job_id, op, args
  progress  worker -> client   job_id, rank, step, total
  done      worker -> client   job_id, rank, result
  failed    worker -> client   job_id, rank, error_type, message, recoverable, traceback
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from typing import Any

import torch

from . import shm

PROTOCOL_VERSION = 1


class _NoGlobalsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"control messages may not reference {module}.{name}")


def encode(message: dict) -> bytes:
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> dict:
    message = _NoGlobalsUnpickler(io.BytesIO(data)).load()
    if not isinstance(message, dict) or "kind" not in message:
        raise pickle.UnpicklingError("a control message must be a dict with a 'kind'")
    return message


def is_tensor_spec(value: Any) -> bool:
    return isinstance(value, dict) and "__tensor__" in value


# A TensorSpec of a segment its owner keeps from job to job (group/kept_slots.py, native sampling's
# latents, one job per model call): the worker keeps its mapping too (KEPT_MAPPINGS at most, least
# recently used let go), so a call neither maps the segment nor faults its pages in again.
KEPT = "__kept__"
KEPT_MAPPINGS = 8
_kept: dict[str, torch.Tensor] = {}  # segment name -> mapped tensor, least recently used first


def attach_tensors(value: Any) -> Any:
    """Replace every TensorSpec dict inside `value` with the mapped tensor (worker side)."""
    if is_tensor_spec(value):
        spec = shm.TensorSpec.from_wire(value)
        return _attach_kept(spec) if value.get(KEPT) else shm.attach(spec)
    if isinstance(value, dict):
        return {k: attach_tensors(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(attach_tensors(v) for v in value)
    return value


def _attach_kept(spec: shm.TensorSpec) -> torch.Tensor:
    found = _kept.pop(spec.name, None)
    if found is None or tuple(found.shape) != spec.shape or shm.dtype_name(found.dtype) != spec.dtype:
        found = shm.attach(spec)
    _kept[spec.name] = found
    while len(_kept) > KEPT_MAPPINGS:
        _kept.pop(next(iter(_kept)))  # the mapping goes with the last view of it
    return found


def share_tensors(value: Any, names: list[str]) -> Any:
    """Replace every tensor inside `value` with a TensorSpec dict of a new segment (client side).

    The new segment names are appended to `names` so the caller can unlink them when the job ends.
    """
    if isinstance(value, torch.Tensor):
        spec, _ = shm.share(value)
        names.append(spec.name)
        return spec.to_wire()
    if isinstance(value, dict):
        return {k: share_tensors(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(share_tensors(v, names) for v in value)
    return value


@dataclass(frozen=True)
class OutputSlot:
    """A tensor the client allocated before the job: the workers map it (and write a result into it).

    `kept`: the caller owns the segment beyond the job (reused by its next job, workers/group/
    kept_slots.py) and unlinks it itself; the job leaves the name in place."""

    spec: shm.TensorSpec
    tensor: torch.Tensor
    kept: bool = False


class ControlBlock:
    """A small shared array the client owns: cancel request and one heartbeat per rank.

    Layout (float64): [0] job id whose cancel was requested (-1 none), [1 + r] monotonic time of
    rank r's last heartbeat. time.monotonic is CLOCK_MONOTONIC on Linux: comparable across processes.
    """

    def __init__(self, values: torch.Tensor) -> None:
        self.values = values

    @staticmethod
    def create(world_size: int) -> tuple[shm.TensorSpec, ControlBlock]:
        spec, values = shm.create((1 + world_size,), torch.float64)
        values.zero_()
        values[0] = -1
        return spec, ControlBlock(values)

    @staticmethod
    def attach(spec: shm.TensorSpec) -> ControlBlock:
        return ControlBlock(shm.attach(spec))

    def request_cancel(self, job_id: int) -> None:
        self.values[0] = float(job_id)

    def is_cancel_requested(self, job_id: int) -> bool:
        return int(self.values[0].item()) == job_id

    def beat(self, rank: int, now: float) -> None:
        self.values[1 + rank] = now

    def last_beat(self, rank: int) -> float:
        return float(self.values[1 + rank].item())
