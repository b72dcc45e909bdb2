"""A rank's job for tests that call command handlers in-process (under their own
dist.init_process_group): the runtime's JobContext with progress sent nowhere and no cancel requested,
and the group's engine holding a model the test loaded itself."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from ltx2_mgpu.workers.engine.engines import make_engine
from ltx2_mgpu.workers.rank.runtime import JobContext, Runtime


class _NoCancel:
    def is_cancel_requested(self, job_id: int) -> bool:
        return False


class _Quiet(Runtime):
    def send(self, message: dict) -> None:
        pass


def local_job(
    rank: int, world_size: int, model=None, *, engine: str = "comfy", device="cpu", backend: str = "gloo"
) -> JobContext:
    """A JobContext for rank `rank` of `world_size` in-process ranks (their process group's `backend`);
    the engine `engine` holds `model` (a ComfyModel or LoadedModel the test loaded), as if load_model
    had loaded it."""
    runtime = _Quiet(
        rank=rank, world_size=world_size, device=torch.device(device), backend=backend, conn=None,
        control=_NoCancel(), workdir=Path("."), owner_pid=0,
        control_group=dist.group.WORLD if world_size > 1 else None,
    )  # fmt: skip
    runtime.engine = make_engine(engine)
    runtime.engine.model = model
    if model is not None and hasattr(model, "extras"):
        model.extras.setdefault("exchange", runtime.head_exchange())
    return JobContext(job_id=0, runtime=runtime)
