"""The per-rank runtime: process groups, the command loop, and what a job handler can use.

Every rank runs the same commands in the same order (SPMD lockstep). A handler that rejects its
input must do so before its first collective and identically on every rank (raise `InputRejected`);
cancel is agreed by all ranks at a step boundary (`JobContext.check_cancel`).
"""

from __future__ import annotations

import logging
import os
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ...kernels import make_head_exchange
from ..engine.engines import make_engine
from ..engine.protocol import Engine
from ..wire import protocol
from ..wire.gpu_memory import apply_cap
from ..wire.requests import REQUESTS
from .ops import OPS, Cancelled, InputRejected, load_all
from .preview import step_callbacks

_log = logging.getLogger(__name__)


@dataclass
class JobContext:
    """Handed to every op handler for one job."""

    job_id: int
    runtime: Runtime

    @property
    def rank(self) -> int:
        return self.runtime.rank

    @property
    def world_size(self) -> int:
        return self.runtime.world_size

    @property
    def device(self) -> torch.device:
        return self.runtime.device

    @property
    def comm_on_device(self) -> bool:
        """Whether tensors travel between ranks on the device (NCCL), not through host memory (gloo)."""
        return self.runtime.backend == "nccl"

    @property
    def control_group(self) -> dist.ProcessGroup | None:
        return self.runtime.control_group

    @property
    def engine(self) -> Engine:
        """The group's engine (NOTE [engine seam]); InputRejected before any model was loaded."""
        return self.runtime.loaded_engine()

    def head_exchange(self):
        """The group's head exchange (NOTE [engine seam]): built by every rank in the same command, kept."""
        return self.runtime.head_exchange()

    def step_callbacks(self, preview: bool):
        return step_callbacks(self, preview)

    def agree_on_error(self, message: str | None) -> None:
        """Collective: if any rank has an error message, every rank raises InputRejected with the first
        (in rank order), so a failure on one rank leaves the group usable."""
        messages = [message]
        if self.world_size > 1:
            messages = [None] * self.world_size
            dist.all_gather_object(messages, message, group=self.control_group)
        first = next((m for m in messages if m is not None), None)
        if first is not None:
            raise InputRejected(first)

    def release_text_encoder(self) -> list[str]:
        """Drop the resident Gemma 3 text encoder (ops_text keeps it in the runtime's state; every rank
        keeps the same record, so every rank answers alike). NOTE [memory room]."""
        from .ops_text import STATE_KEY

        return ["the text encoder"] if self.runtime.state.pop(STATE_KEY, None) is not None else []

    def progress(self, step: int, total: int, **extra: Any) -> None:
        """Report progress (rank 0 only sends; other ranks' calls are no-ops)."""
        if self.runtime.rank == 0:
            self.runtime.send(
                {"kind": "progress", "job_id": self.job_id, "rank": 0, "step": step, "total": total, **extra}
            )

    def cancel_requested(self) -> bool:
        """This rank's view of the cancel request (no collective; NOTE [units] in engine/units.py)."""
        return self.runtime.control.is_cancel_requested(self.job_id)

    def check_cancel(self) -> None:
        """Collective: raise Cancelled on every rank if a cancel was requested on any rank's view."""
        exchange = self.runtime.state.get("exchange")
        if hasattr(exchange, "check"):
            exchange.check(sync=False)  # a kernel wait that timed out surfaces here as an error, not a hang
        flag = torch.tensor([1 if self.cancel_requested() else 0], dtype=torch.int32)
        if self.runtime.world_size > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.runtime.control_group)
        if int(flag.item()):
            raise Cancelled(f"job {self.job_id} cancelled")


def _store(boot: dict, world_size: int) -> dist.Store:
    """The group's rendezvous: the FileStore in the group's folder, reached through the machine agent by a
    rank on another machine (NOTE [machines] in wire/machines.py)."""
    relay = boot.get("store_relay")
    if relay is None:
        return dist.FileStore(boot["store_path"], world_size)
    from multiprocessing.connection import Client

    from ..wire.relay_store import RelayStore

    return RelayStore(Client(relay["address"], family="AF_UNIX", authkey=bytes.fromhex(relay["authkey"])))


class SingleRank:
    """The head exchange of a one-rank group: nothing to exchange (engines run the plain forward)."""

    name, rank, world_size = "none", 0, 1


@dataclass
class Runtime:
    rank: int
    world_size: int
    device: torch.device
    backend: str
    conn: Connection
    control: protocol.ControlBlock
    workdir: Path
    owner_pid: int
    control_group: dist.ProcessGroup | None = None
    state: dict[str, Any] = field(default_factory=dict)  # what ops keep between jobs (the text encoder...)
    engine: Engine | None = None  # made by the first command that names one (NOTE [engine seam])

    @staticmethod
    def from_boot(boot: dict, conn: Connection, control: protocol.ControlBlock, workdir: Path) -> Runtime:
        device = torch.device(boot["device"])
        if device.type == "cuda":
            torch.cuda.set_device(device)
            apply_cap(device)  # NOTE [gpu memory cap]: before anything is allocated
        threads = int(boot.get("threads", 0))
        if threads > 0:
            torch.set_num_threads(threads)
        rt = Runtime(
            rank=int(boot["rank"]),
            world_size=int(boot["world_size"]),
            device=device,
            backend=boot["backend"],
            conn=conn,
            control=control,
            workdir=workdir,
            owner_pid=int(boot["owner_pid"]),
        )
        load_all()
        rt._init_process_group(boot)
        rt.send({"kind": "ready", "rank": rt.rank, "backend": rt.backend, "info": rt.describe()})
        return rt

    def _init_process_group(self, boot: dict) -> None:
        if self.world_size == 1:
            return
        store = _store(boot, self.world_size)
        # Held for the group's life: later groups (dist.new_group) meet in it too, and a store written in
        # Python would otherwise be collected under the C++ side that still uses it.
        self.state["store"] = store
        kwargs: dict[str, Any] = {}
        if self.backend == "nccl":
            kwargs["device_id"] = self.device
        dist.init_process_group(
            self.backend,
            store=store,
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(minutes=30),
            **kwargs,
        )
        # Control collectives (cancel agreement) stay on the CPU whatever the data backend is.
        self.control_group = dist.new_group(backend="gloo") if self.backend != "gloo" else dist.group.WORLD

    def engine_for(self, name: str) -> Engine:
        """The group's engine `name`, made now when the group has none yet. InputRejected (alike on every
        rank) when the group already runs another: a group runs one engine for its life (the group
        manager starts a new group for another)."""
        if self.engine is None:
            try:
                self.engine = make_engine(name)
            except ValueError as exc:  # an unknown name, or its package missing: alike on every rank
                raise InputRejected(str(exc)) from exc
        elif self.engine.name != name:
            raise InputRejected(
                f"this worker group runs {self.engine.capabilities.title}; a model for the {name} engine needs a "
                "new group (the MGPU Loader starts one when the engine changes)"
            )
        return self.engine

    def loaded_engine(self) -> Engine:
        if self.engine is None:
            raise InputRejected("no model is loaded in the worker group; run the MGPU Loader first")
        return self.engine

    def head_exchange(self):
        if "exchange" not in self.state:
            self.state["exchange"] = (
                make_head_exchange(None, self.device) if self.world_size > 1 else SingleRank()
            )
        return self.state["exchange"]

    def describe(self) -> dict:
        info = {
            "pid": os.getpid(),
            "device": str(self.device),
            "torch": str(torch.__version__),
            "threads": torch.get_num_threads(),
        }
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            info["gpu"] = props.name
            info["gpu_memory_bytes"] = int(props.total_memory)
        return info

    def send(self, message: dict) -> None:
        self.conn.send_bytes(protocol.encode(message))

    def serve(self) -> bool:
        """Run commands until "stop" (returns True) or until the client goes away (False: the caller
        looks whether its owner died and cleans up after it, rank/entry.py)."""
        while True:
            try:
                message = protocol.decode(self.conn.recv_bytes())
            except (EOFError, OSError):
                return False
            if message.get("kind") != "request":
                continue
            job_id, op = int(message["job_id"]), str(message["op"])
            if op == "stop":
                self.send({"kind": "done", "job_id": job_id, "rank": self.rank, "result": {}})
                return True
            self._run_job(job_id, op, message.get("args") or {})

    def _run_job(self, job_id: int, op: str, args: dict) -> None:
        job = JobContext(job_id=job_id, runtime=self)
        try:
            handler = OPS.get(op)
            if handler is None:
                raise InputRejected(f"unknown command {op!r}; this worker knows {sorted(OPS)}")
            result = handler(job, protocol.attach_tensors(args))
            self.send({"kind": "done", "job_id": job_id, "rank": self.rank, "result": result or {}})
        except Cancelled as exc:
            self._send_failure(job_id, op, exc, error_type="cancelled", recoverable=True)
        except InputRejected as exc:
            self._send_failure(job_id, op, exc, error_type="input", recoverable=True)
        except Exception as exc:  # reported, then the client decides whether the group survives
            # The traceback is for the console (the worker's stderr is ComfyUI's); the user's
            # message carries the cause only (client.py).
            _log.error(
                "[LTX2 MultiGPU] rank %d (%s): command %r failed:\n%s",
                self.rank,
                self.device,
                op,
                "".join(traceback.format_exception(exc)).rstrip(),
            )
            self._send_failure(job_id, op, exc, error_type=type(exc).__name__, recoverable=False)
        finally:
            request = REQUESTS.get(op)
            if self.device.type == "cuda" and (request is None or request.FREES_GPU_CACHE):
                torch.cuda.empty_cache()

    def _send_failure(
        self, job_id: int, op: str, exc: BaseException, *, error_type: str, recoverable: bool
    ) -> None:
        self.send(
            {
                "kind": "failed",
                "job_id": job_id,
                "op": op,
                "rank": self.rank,
                "error_type": error_type,
                "message": str(exc),
                "recoverable": recoverable,
                "traceback": "".join(traceback.format_exception(exc)),
            }
        )
