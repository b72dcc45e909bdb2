"""Head exchange for sequence parallelism: the CUDA-IPC all2all kernel, or torch.distributed as fallback.

`make_head_exchange` is the one entry point the worker runtime uses; it is collective over the group.
It picks the kernel when every check passes on every rank, in this order (cheapest first):
LTX2_MGPU_ALL2ALL is not "fallback"; this rank's device is CUDA; the extension is built (building it on
first use, build.py); all ranks on one host; the grid stays resident (NOTE [residency]); every rank
allocates its buffer, maps every peer's, and reads back a probe each peer wrote into it. The verdict is
gathered from all ranks, so all pick the same backend; otherwise the fallback, with one log line naming
the first failing rank and why. LTX2_MGPU_ALL2ALL=kernel makes that a RuntimeError instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator

import torch
import torch.distributed as dist

from .fallback import TorchDistHeadExchange
from .partition import even_split, head_split, offsets, padded_token_split
from .protocol import HeadExchange

__all__ = [
    "ENV_MODE",
    "HeadExchange",
    "KernelStatus",
    "TorchDistHeadExchange",
    "even_split",
    "head_split",
    "kernel_status",
    "make_head_exchange",
    "offsets",
    "padded_token_split",
]

_log = logging.getLogger("ltx2_mgpu.kernels")

ENV_MODE = "LTX2_MGPU_ALL2ALL"  # auto (default) | kernel (required, raise if it cannot run) | fallback
ENV_TIMEOUT = "LTX2_MGPU_ALL2ALL_TIMEOUT_S"  # default wait timeout of the kernel, seconds
MODES = ("auto", "kernel", "fallback")


@dataclasses.dataclass(frozen=True)
class KernelStatus:
    """What `ltx2-mgpu doctor` reports about the all2all kernel in this process."""

    mode: str  # LTX2_MGPU_ALL2ALL: auto | kernel | fallback
    built: bool  # the extension is compiled (and, if build was requested, imported)
    reason: str | None  # why it is not built; None when built
    cache_dir: str  # where the binary is, or would be, built
    cuda_home: str | None  # the CUDA toolkit the build uses
    archs: tuple[str, ...]  # machine-code targets, e.g. ("9.0",); PTX is added for the last
    peer_access: tuple[tuple[int, int, bool], ...]  # (gpu, gpu, driver says peer access works), visible GPUs
    selected: (
        str | None
    )  # backend picked by the last make_head_exchange here: "ipc-kernel" | "torch.distributed"
    selected_reason: str | None  # why the last selection fell back; None if it did not


@dataclasses.dataclass(frozen=True)
class _Selection:
    backend: str
    reason: str | None


_last_selection: _Selection | None = None


def _mode() -> str:
    mode = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(f"{ENV_MODE}={mode!r} is not one of {', '.join(MODES)}")
    return mode


def _default_timeout_s() -> float:
    from .ipc_all2all import DEFAULT_TIMEOUT_S

    text = os.environ.get(ENV_TIMEOUT)
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e9:
        raise ValueError(f"{ENV_TIMEOUT}={text!r} must be a positive number of seconds")
    return value


def _local_reason(device: torch.device, world_size: int) -> str | None:
    """Why this rank cannot run the kernel, or None. Builds the extension if needed."""
    if device.type != "cuda":
        return f"this rank's device is {device}; the kernel needs CUDA"
    if not torch.cuda.is_available():
        return "CUDA is not available in this process"
    from .build import build_failure_reason, load_kernels

    native = load_kernels()
    if native is None:
        return f"the kernel is not built ({build_failure_reason()})"
    if world_size > native.MAX_RANKS:
        return f"{world_size} ranks exceed the kernel's limit of {native.MAX_RANKS}"
    return None


def _slot_bytes(
    world_size: int, max_tokens: int | None, num_heads: int, head_dim: int, dtype: torch.dtype
) -> int:
    """Receive bytes per rank for send_recv_heads / gather_heads at `max_tokens` (batch x tokens)."""
    if max_tokens is None:
        return 0
    tokens = max(even_split(max_tokens, world_size))
    heads = max(even_split(num_heads, world_size))
    return max(max_tokens * heads, tokens * num_heads) * head_dim * dtype.itemsize


@contextlib.contextmanager
def _on_device(device: torch.device) -> Iterator[None]:
    # all_gather_object on NCCL stages objects on the current CUDA device: make it this rank's.
    with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():
        yield


def _select(
    group: dist.ProcessGroup | None, device: torch.device, slot_bytes: int, timeout_s: float
) -> tuple[HeadExchange | None, str]:
    world_size = dist.get_world_size(group)
    reason = _local_reason(device, world_size)
    reasons: list[object] = [None] * world_size
    dist.all_gather_object(reasons, reason, group=group)
    failing = [(rank, r) for rank, r in enumerate(reasons) if r is not None]
    if failing:
        return None, f"rank {failing[0][0]}: {failing[0][1]}"
    from .build import load_kernels
    from .ipc_all2all import INITIAL_SLOT_BYTES, create_ipc_exchange

    native = load_kernels()
    slot = max(slot_bytes, INITIAL_SLOT_BYTES)
    exchange, failure = create_ipc_exchange(group, device, native, slot_bytes=slot, timeout_s=timeout_s)
    return exchange, failure or ""


def make_head_exchange(
    group: dist.ProcessGroup | None,
    device: torch.device,
    *,
    max_tokens: int | None = None,
    num_heads: int = 32,
    head_dim: int = 128,
    dtype: torch.dtype = torch.bfloat16,
    timeout_s: float | None = None,
) -> HeadExchange:
    """Pick the backend for this group. Collective: every rank of `group` must call it.

    `max_tokens` (batch x tokens over the whole sequence), `num_heads`, `head_dim` and `dtype` size the
    kernel's buffers up front; without them they grow on the first call that needs more (collectively,
    at the same call on every rank). `timeout_s` bounds every wait inside the kernel (default 10 s, or
    LTX2_MGPU_ALL2ALL_TIMEOUT_S).
    """
    global _last_selection
    mode = _mode()
    if mode == "fallback":
        _last_selection = _Selection(TorchDistHeadExchange.name, f"{ENV_MODE}=fallback")
        return TorchDistHeadExchange(group)
    timeout = _default_timeout_s() if timeout_s is None else timeout_s
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    slot = _slot_bytes(dist.get_world_size(group), max_tokens, num_heads, head_dim, dtype)
    with _on_device(device):
        exchange, reason = _select(group, device, slot, timeout)
    if exchange is not None:
        _last_selection = _Selection(exchange.name, None)
        return exchange
    _last_selection = _Selection(TorchDistHeadExchange.name, reason)
    if mode == "kernel":
        raise RuntimeError(f"{ENV_MODE}=kernel, but the IPC all2all kernel cannot run: {reason}")
    if dist.get_rank(group) == 0:
        level = logging.WARNING if device.type == "cuda" else logging.INFO  # CPU groups never use the kernel
        _log.log(level, "ltx2_mgpu: SP all2all falls back to torch.distributed: %s", reason)
    return TorchDistHeadExchange(group)


def _peer_access() -> tuple[tuple[int, int, bool], ...]:
    if not torch.cuda.is_available():
        return ()
    n = torch.cuda.device_count()
    return tuple(
        (a, b, torch.cuda.can_device_access_peer(a, b)) for a in range(n) for b in range(n) if a != b
    )


def kernel_status(build: bool = False) -> KernelStatus:
    """Report for `ltx2-mgpu doctor`. With build=True, builds (or loads) the extension first."""
    from . import build as kbuild

    config = kbuild.build_config()
    if build:
        built = kbuild.load_kernels() is not None
    else:
        built = any(config.build_dir.glob(f"{kbuild.EXTENSION_NAME}*.so"))
    reason = None
    if not built:
        reason = kbuild.build_failure_reason() or (
            "not built yet (`ltx2-mgpu build-kernels`)"
            if config.nvcc is not None
            else "no CUDA toolkit (nvcc) found"
        )
    selection = _last_selection
    return KernelStatus(
        mode=os.environ.get(ENV_MODE, "auto"),
        built=built,
        reason=reason,
        cache_dir=str(config.build_dir),
        cuda_home=None if config.cuda_home is None else str(config.cuda_home),
        archs=tuple(f"{major}.{minor}" for major, minor in config.archs),
        peer_access=_peer_access(),
        selected=None if selection is None else selection.backend,
        selected_reason=None if selection is None else selection.reason,
    )
