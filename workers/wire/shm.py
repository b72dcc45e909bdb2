"""Tensors in POSIX shared memory, owned by the UI process and mapped by workers.

NOTE [shm lifetime]: the UI process creates every segment (owner-only permissions, a random name
that carries its pid) and unlinks the name as soon as the job that uses it ends. Mappings outlive
the name, so the tensor a node returns stays valid while nothing is left in /dev/shm. A segment
whose owner died before unlinking is removed by its workers as they exit (workers/rank/entry.py), and
failing that by `sweep_stale_segments` when the next group starts. When the owner exits, `close_owner`
unlinks all its names and refuses new ones (workers/group/shutdown.py). Linux only (as NCCL and CUDA IPC are).

Pre-faulting a segment's pages before writing them: shm_prefault.py.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import re
import secrets
import threading
from dataclasses import dataclass

import torch

from .config import SHM_DIR, SHM_PREFIX

_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_NAME_RE = re.compile(rf"^{SHM_PREFIX}-(\d+)-[0-9a-f]+$")
# Held from the closed-check to the name's creation, so `close_owner` sees every name made before it
# closed and none is made after. Re-entrant: close_owner may run in a signal handler on the main thread.
_CREATE_LOCK = threading.RLock()
_closed = False


def dtype_name(dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise TypeError(f"tensors of dtype {dtype} cannot travel through shared memory")
    return name


def dtype_from_name(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise TypeError(f"unknown dtype {name!r} in a tensor spec") from None


@dataclass(frozen=True)
class TensorSpec:
    """Where a tensor lives: the segment name, its shape and dtype. Travels on the control channel."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * torch.empty((), dtype=dtype_from_name(self.dtype)).element_size()

    def to_wire(self) -> dict:
        return {"__tensor__": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @staticmethod
    def from_wire(d: dict) -> TensorSpec:
        return TensorSpec(name=d["__tensor__"], shape=tuple(int(s) for s in d["shape"]), dtype=d["dtype"])


def new_segment_name() -> str:
    return f"{SHM_PREFIX}-{os.getpid()}-{secrets.token_hex(8)}"


def path_of(name: str) -> str:
    """The file of segment `name` (ValueError for a name that is not one of this pack's)."""
    return _path(name)


def _path(name: str) -> str:
    if not _NAME_RE.match(name):
        # Names come over the control channel: refuse anything that could point outside SHM_DIR.
        raise ValueError(f"not a segment name of this pack: {name!r}")
    return os.path.join(SHM_DIR, name)


def _map(fd: int, nbytes: int) -> mmap.mmap:
    return mmap.mmap(fd, max(nbytes, 1))


def _as_tensor(buf: mmap.mmap, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    numel = math.prod(shape)
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(buf, dtype=torch.uint8)  # keeps `buf` alive as long as any view exists
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    return flat[:nbytes].view(dtype).view(shape)


def create(
    shape: tuple[int, ...] | torch.Size, dtype: torch.dtype, name: str | None = None
) -> tuple[TensorSpec, torch.Tensor]:
    """Create a segment (mode 0600) and map it as a tensor. The caller owns the name: call `unlink`.
    Whatever fails once the name exists (a full /dev/shm, a shape the tensor cannot take) unlinks it."""
    dims = tuple(int(s) for s in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"cannot share a tensor of shape {dims}: a size is negative")
    spec = TensorSpec(name=name or new_segment_name(), shape=dims, dtype=dtype_name(dtype))
    with _CREATE_LOCK:
        if _closed:
            raise RuntimeError(
                "this process is exiting: its worker groups were stopped, no new tensors are shared"
            )
        fd = os.open(_path(spec.name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, max(spec.nbytes, 1))
        return spec, _as_tensor(_map(fd, spec.nbytes), spec.shape, dtype)
    except BaseException:
        unlink(spec.name)
        raise
    finally:
        os.close(fd)


def share(tensor: torch.Tensor) -> tuple[TensorSpec, torch.Tensor]:
    """Copy a tensor into a new segment. Returns the spec and the shared copy."""
    spec, shared = create(tensor.shape, tensor.dtype)
    shared.copy_(tensor.detach())
    return spec, shared


def attach(spec: TensorSpec) -> torch.Tensor:
    """Map an existing segment as a writable tensor (worker side, or the owner reading a worker's result)."""
    fd = os.open(_path(spec.name), os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size < spec.nbytes:
            raise ValueError(f"segment {spec.name} holds {size} bytes, the spec needs {spec.nbytes}")
        buf = _map(fd, spec.nbytes)
    finally:
        os.close(fd)
    return _as_tensor(buf, spec.shape, dtype_from_name(spec.dtype))


def unlink(name: str) -> None:
    """Remove the name (mappings stay valid). Missing names are fine: unlink is idempotent."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(name))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_segments(owner_pid: int | None = None) -> list[str]:
    """Names of this pack's segments in SHM_DIR, optionally only those of one owner."""
    try:
        entries = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    names = []
    for entry in entries:
        m = _NAME_RE.match(entry)
        if m and (owner_pid is None or int(m.group(1)) == owner_pid):
            names.append(entry)
    return sorted(names)


def unlink_owner_segments(owner_pid: int) -> list[str]:
    """Unlink every segment of one owner process. Returns their names."""
    names = list_segments(owner_pid)
    for name in names:
        unlink(name)
    return names


def close_owner() -> list[str]:
    """This process is exiting: unlink all its segments and refuse to create any more. Returns the names."""
    global _closed
    with _CREATE_LOCK:
        _closed = True
    return unlink_owner_segments(os.getpid())


def sweep_stale_segments() -> list[str]:
    """Unlink segments whose owner process is gone (a UI process killed mid-job). Returns their names."""
    removed = []
    for name in list_segments():
        m = _NAME_RE.match(name)
        if m and not _pid_alive(int(m.group(1))):
            unlink(name)
            removed.append(name)
    return removed
