"""Loading and unloading the checkpoint in every rank, on the group's engine (NOTE [engine seam] in
workers/engine/protocol.py): the load names the engine; the runtime makes it at the first load."""

from __future__ import annotations

from pathlib import Path

from ..wire.requests import LoadModel, SetCompiled, UnloadModel
from .ops import InputRejected, op


@op(LoadModel)
def load_model(job, request: LoadModel) -> dict:
    """Load the checkpoint on every rank (the engine skips it when the same one is loaded)."""
    path = Path(request.checkpoint)
    if not path.is_file():
        raise InputRejected(f"checkpoint {path} does not exist on this machine")
    return job.runtime.engine_for(request.backend).load(job, request)


@op(SetCompiled)
def set_compiled(job, request: SetCompiled) -> dict:
    """Switch torch.compile of the loaded transformer's blocks on or off (benchmarks)."""
    return job.engine.set_compiled(job, request.compile)


@op(UnloadModel)
def unload_model(job, request: UnloadModel) -> dict:
    engine = job.runtime.engine
    if engine is not None:
        engine.unload()  # the runtime empties the device's cache after the command
    return {}
