"""The CUDA-IPC HeadExchange: Python owner of the exchange engine (csrc/engine.cpp).

Python owns what is collective or long-lived: the buffers' lifetime, the IPC handle exchange over the
process group (all_gather_object, so it works on gloo and NCCL alike), the setup probe, growing the
buffers, and turning the kernel's timeout record into a Python error. The engine is the per-rank
mechanism behind one opaque object. Buffer layout, epochs and slot reuse: the NOTEs in csrc/exchange.h.

Errors: a wait that times out on the GPU is recorded by the kernel, which then returns (no trap, the
process lives on). The record is read without blocking at the start of every later call on this
exchange, and by `check()` (which synchronises first; the worker runtime calls it at step boundaries).
Either raises `ExchangeTimeoutError`, and every later call raises it again: the ranks' epochs no longer
agree, so the exchange must be rebuilt (with the worker group). With LTX2_MGPU_ALL2ALL_SYNC=1 every call
synchronises and checks, so the error surfaces at the call that timed out.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import socket
import weakref
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist

from . import ops

__all__ = ["DEFAULT_TIMEOUT_S", "ExchangeTimeoutError", "IpcHeadExchange", "create_ipc_exchange"]

_log = logging.getLogger("ltx2_mgpu.kernels")

DEFAULT_TIMEOUT_S = (
    10.0  # issue #kernels: long enough for a first torch.compile on one rank, short enough to notice
)
INITIAL_SLOT_BYTES = 1 << 20  # the probe needs only a few bytes; real sizes come from max_tokens or growth
SLOT_ALIGN_BYTES = 1 << 21  # slots are sized in 2 MiB steps (the driver's large-page size)
GROWTH_HEADROOM = 1.125  # grow 1/8 beyond the need, so a slightly longer clip does not regrow again
ENV_SYNC = "LTX2_MGPU_ALL2ALL_SYNC"  # "1": synchronise and check after every call (debugging)
ENV_BLOCKS = "LTX2_MGPU_ALL2ALL_BLOCKS"  # override the grid size (tuning); clamped to residency


class ExchangeTimeoutError(RuntimeError):
    """A rank waited longer than the timeout for a peer's pieces. Fatal for this exchange."""

    def __init__(self, op: str, rank: int, peer: int, epoch: int, elapsed_s: float, timeout_s: float) -> None:
        self.op, self.rank, self.peer, self.epoch = op, rank, peer, epoch
        self.elapsed_s, self.timeout_s = elapsed_s, timeout_s
        super().__init__(
            f"ltx2_mgpu IPC exchange: rank {rank} waited {elapsed_s:.2f} s (timeout {timeout_s:g} s) in {op} "
            f"(call #{epoch}) for rank {peer} to deliver its pieces; rank {peer} never arrived (stuck, crashed, "
            f"or called a different op). This exchange is unusable now: rebuild the worker group."
        )


@dataclasses.dataclass(frozen=True)
class _RankReport:
    """What one rank tells the others at each setup step (gathered with all_gather_object)."""

    ok: bool
    reason: str = ""
    host: str = ""
    device_uuid: str = ""
    handle: bytes = b""
    nonce: int = 0


def _gather(group: dist.ProcessGroup | None, report: _RankReport) -> list[_RankReport]:
    reports: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(reports, report, group=group)
    return reports


def _first_failure(reports: list[_RankReport]) -> str | None:
    for rank, report in enumerate(reports):
        if not report.ok:
            return f"rank {rank}: {report.reason}"
    return None


def _round_slot(need_bytes: int) -> int:
    want = max(INITIAL_SLOT_BYTES, int(need_bytes * GROWTH_HEADROOM))
    return -(-want // SLOT_ALIGN_BYTES) * SLOT_ALIGN_BYTES


def _grid_blocks(native: ModuleType, device: torch.device, world_size: int, ranks_on_device: int) -> int:
    """Blocks per launch: one per SM, never more than stay resident beside the device's other ranks.

    One block per SM, not every resident block (two per H200 SM at 48 registers a thread): on one H200
    the 1-rank copy at 32640 tokens ran at 1889 GB/s with 132 blocks against 1818 GB/s with 264
    (bench/bench_all2all.py on the device H200). NOTE [residency] for the clamp.
    """
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    resident = native.blocks_per_sm(device.index) * sms // ranks_on_device  # NOTE [residency]
    wanted = int(os.environ.get(ENV_BLOCKS, sms))
    blocks = min(wanted, resident)
    if blocks < world_size:
        raise RuntimeError(
            f"only {resident} exchange blocks stay resident on {device} with {ranks_on_device} ranks on it; "
            f"{world_size} ranks need at least {world_size}"
        )
    return blocks


def _try(step: str, fn: Any, *args: Any) -> tuple[Any, str]:
    """Run one local setup step; a CUDA/driver failure becomes a reason string, not an exception."""
    try:
        return fn(*args), ""
    except (RuntimeError, ValueError, OSError) as exc:
        return None, f"{step}: {exc}"


def _check_probe(engine: Any, reports: list[_RankReport], rank: int) -> None:
    for source, (word, lo, hi, target, origin) in enumerate(engine.probe_read()):
        if source == rank:
            continue
        nonce = reports[source].nonce
        if word != nonce or (lo | (hi << 32)) != nonce or (target, origin) != (rank, source):
            raise RuntimeError(
                f"a probe written by rank {source} through CUDA IPC did not arrive intact (read {word:#x}, "
                f"expected {nonce:#x}); peer access between these GPUs does not work"
            )


def _open_and_probe(
    group: dist.ProcessGroup | None, engine: Any, reports: list[_RankReport], rank: int, probe: bool
) -> str | None:
    """Map the peers' buffers, then (if `probe`) prove a real cross-process write and read. Collective."""
    _, reason = _try("opening peer buffers", engine.open_peers, [r.handle for r in reports])
    if not reason and probe:
        _, reason = _try("probe write", engine.probe_write, reports[rank].nonce)
    failure = _first_failure(_gather(group, _RankReport(ok=not reason, reason=reason)))  # writes all done
    if failure is None and probe:
        _, reason = _try("probe read", _check_probe, engine, reports, rank)
        failure = _first_failure(_gather(group, _RankReport(ok=not reason, reason=reason)))
    return failure


def _make_engine(
    native: ModuleType,
    group: dist.ProcessGroup | None,
    device: torch.device,
    slot_bytes: int,
    blocks: int,
    timeout_s: float,
    probe: bool,
) -> tuple[Any | None, str | None]:
    """Allocate, exchange handles, open peers, probe. Collective; on failure every rank gets the same reason."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    engine, reason = _try(
        "allocating the exchange buffer",
        native.Engine,
        rank,
        world_size,
        device.index,
        slot_bytes,
        blocks,
        timeout_s,
    )
    handle = bytes(engine.ipc_handle()) if engine is not None else b""
    mine = _RankReport(ok=engine is not None, reason=reason, handle=handle, nonce=secrets.randbits(62) + 1)
    reports = _gather(group, mine)
    failure = _first_failure(reports) or _open_and_probe(group, engine, reports, rank, probe)
    if failure is not None:
        if engine is not None:
            engine.close()
        return None, failure
    return engine, None


def create_ipc_exchange(
    group: dist.ProcessGroup | None,
    device: torch.device,
    native: ModuleType,
    *,
    slot_bytes: int = INITIAL_SLOT_BYTES,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> tuple[IpcHeadExchange | None, str | None]:
    """Set up the IPC exchange on every rank of `group`, or say why it cannot run. Collective.

    Returns (exchange, None) on every rank, or (None, reason) on every rank; never raises for a setup
    failure. `device` is this rank's GPU (any index; ranks may share one).
    """
    identity = _RankReport(
        ok=True, host=socket.gethostname(), device_uuid=str(torch.cuda.get_device_properties(device).uuid)
    )
    reports = _gather(group, identity)
    if len({r.host for r in reports}) != 1:
        return (
            None,
            f"ranks run on several hosts ({sorted({r.host for r in reports})}); CUDA IPC needs one host",
        )
    ranks_on_device = sum(r.device_uuid == identity.device_uuid for r in reports)
    blocks, reason = _try("sizing the grid", _grid_blocks, native, device, len(reports), ranks_on_device)
    failure = _first_failure(_gather(group, _RankReport(ok=not reason, reason=reason)))
    if failure is not None:
        return None, failure
    engine, failure = _make_engine(
        native, group, device, _round_slot(slot_bytes), blocks, timeout_s, probe=True
    )
    if engine is None:
        return None, failure
    return IpcHeadExchange(group, device, native, engine), None


def _need_bytes(op: str, x: torch.Tensor, counts: Sequence[Sequence[int]]) -> int:
    """Largest slot any rank needs for this op; the same number on every rank (so growth is collective)."""
    e = x.element_size()
    if op == "send_recv_heads":
        tokens, heads = counts
        return x.shape[0] * sum(tokens) * max(heads) * x.shape[3] * e
    if op == "gather_heads":
        tokens, heads = counts
        return x.shape[0] * max(tokens) * sum(heads) * x.shape[3] * e
    if op == "all_gather_tokens":
        return x.shape[0] * sum(counts[0]) * x.shape[2] * e
    return x.shape[0] * x.shape[1] * sum(counts[0]) * x.shape[3] * e  # all_gather_heads


def _close_engine(engine: Any) -> None:
    try:
        engine.close()
    except RuntimeError as exc:  # at collection time there is nobody to raise to
        _log.warning("closing the IPC exchange failed: %s", exc)


class IpcHeadExchange:
    """HeadExchange (protocol.py) over CUDA IPC. Build it with `create_ipc_exchange` (collective).

    Every method is collective over the group and asynchronous on the current CUDA stream; outputs are
    new tensors. Buffers are freed by `close()` (collective: no peer may still be writing), or, without a
    barrier, when this object is garbage-collected or the interpreter exits.
    """

    name = "ipc-kernel"

    def __init__(
        self, group: dist.ProcessGroup | None, device: torch.device, native: ModuleType, engine: Any
    ) -> None:
        self.group = group
        self.device = device
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self._native = native
        self._engine = engine
        self._failure: BaseException | None = None
        self._sync_each_call = os.environ.get(ENV_SYNC, "") == "1"
        self._id = ops.register(self)
        self._finalizer = weakref.finalize(self, _close_engine, engine)
        self._generation = 0  # bumped by every grow: the buffers a captured CUDA graph points at

    # --- HeadExchange -------------------------------------------------------------------------------
    # Under torch.compile the calls go through the custom ops (ops.py), which Dynamo traces with their
    # fake implementations; in eager mode they skip the dispatcher, whose overhead was larger than the
    # kernel: a 1-rank call at 6144 tokens on an H200 went from 60 us to 32 us (bench/bench_all2all.py).
    def send_recv_heads(
        self, x: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return torch.ops.ltx2_mgpu.send_recv_heads(
                x, self._id, self.rank, list(token_counts), list(head_counts)
            )
        return self.run_op("send_recv_heads", x, list(token_counts), list(head_counts))

    def gather_heads(
        self, y: torch.Tensor, token_counts: Sequence[int], head_counts: Sequence[int]
    ) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return torch.ops.ltx2_mgpu.gather_heads(
                y, self._id, self.rank, list(token_counts), list(head_counts)
            )
        return self.run_op("gather_heads", y, list(token_counts), list(head_counts))

    def all_gather_tokens(self, x: torch.Tensor, token_counts: Sequence[int]) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return torch.ops.ltx2_mgpu.all_gather_tokens(x, self._id, self.rank, list(token_counts))
        return self.run_op("all_gather_tokens", x, list(token_counts))

    def all_gather_heads(self, x: torch.Tensor, head_counts: Sequence[int]) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return torch.ops.ltx2_mgpu.all_gather_heads(x, self._id, self.rank, list(head_counts))
        return self.run_op("all_gather_heads", x, list(head_counts))

    # --- called by the custom ops (ops.py) ------------------------------------------------------------
    def run_op(self, op: str, x: torch.Tensor, *counts: list[int]) -> torch.Tensor:
        self._raise_if_failed()
        if not x.is_contiguous():
            x = x.contiguous()
        need = _need_bytes(op, x, counts)
        if need > self._engine.slot_bytes:
            self._grow(need)
        out = getattr(self._engine, op)(x, *counts)
        if self._sync_each_call:
            self.check()
        return out

    # --- errors, lifetime -----------------------------------------------------------------------------
    def check(self, sync: bool = True) -> None:
        """Raise ExchangeTimeoutError if any wait of this rank timed out (after synchronising the device)."""
        if sync and not self._engine.closed:
            torch.cuda.synchronize(self.device)
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._failure is None and self._engine.error() is not None:
            op, rank, peer, epoch, elapsed_ns, timeout_ns = self._engine.error()
            self._failure = ExchangeTimeoutError(op, rank, peer, epoch, elapsed_ns * 1e-9, timeout_ns * 1e-9)
        if self._failure is not None:
            raise self._failure
        if self._engine.closed:
            raise RuntimeError("ltx2_mgpu IPC exchange used after close()")

    @property
    def timeout_s(self) -> float:
        return self._engine.timeout_s

    def set_timeout(self, timeout_s: float) -> None:
        """Change the wait timeout for later calls (e.g. longer around a first torch.compile). Local."""
        if not 0 < timeout_s < 1e9:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s}")
        self._engine.set_timeout(timeout_s)

    def calls_completed(self) -> int:
        """Ops this rank has completed (synchronises; tests and diagnostics)."""
        return self._engine.epoch()

    @property
    def blocks(self) -> int:
        """Thread blocks per launch (NOTE [residency])."""
        return self._engine.blocks

    @property
    def slot_bytes(self) -> int:
        return self._engine.slot_bytes

    def reserve(self, need_bytes: int) -> None:
        """Grow the buffers so one rank can receive `need_bytes` per op. Collective; same value on all ranks."""
        self._raise_if_failed()
        if need_bytes > self._engine.slot_bytes:
            self._grow(need_bytes)

    def _grow(self, need_bytes: int) -> None:
        # Every rank grows at the same call (need_bytes is rank-independent). Nobody may still write
        # into the old buffers: synchronise, then a barrier, then free and reallocate.
        old = self._engine
        torch.cuda.synchronize(self.device)
        _gather(self.group, _RankReport(ok=True))
        self._finalizer.detach()
        old.close()
        engine, failure = _make_engine(
            self._native,
            self.group,
            self.device,
            _round_slot(need_bytes),
            old.blocks,
            old.timeout_s,
            probe=False,
        )
        if engine is None:
            self._failure = RuntimeError(
                f"ltx2_mgpu IPC exchange could not grow to {need_bytes} bytes: {failure}"
            )
            raise self._failure
        self._engine = engine
        self._finalizer = weakref.finalize(self, _close_engine, engine)
        self._generation += 1

    def capture_key(self) -> tuple[int, int]:
        """What a CUDA graph that captured this exchange's kernels depends on: the buffers it points at
        (their generation: a grow frees them). The kernel itself replays correctly (NOTE [epoch] in
        csrc/exchange.h: the op counter lives on the device). Local, no collective."""
        return (self._id, self._generation)

    def close(self, collective: bool = True) -> None:
        """Free the buffers. Collective by default (waits for every rank first). Idempotent."""
        if self._engine.closed:
            return
        if collective:
            torch.cuda.synchronize(self.device)
            _gather(self.group, _RankReport(ok=True))
        self._finalizer()

    def __enter__(self) -> IpcHeadExchange:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(collective=exc[0] is None)
