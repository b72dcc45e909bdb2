"""Loading and unloading the checkpoint in every rank."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import torch
from safetensors import SafetensorError

from ...kernels import make_head_exchange
from ..engine.ltxcore.fp8_linear import check_fp8_matmul
from ..engine.ltxcore.model import LoadedModel
from ..wire.backend import BACKEND_COMFY
from ..wire.checks import DTYPES, ForwardMode
from ..wire.requests import LoadModel, SetCompiled, UnloadModel
from .ops import InputRejected, op
from .ops_comfy import load_comfy


def _exchange(job):
    rt = job.runtime
    if "exchange" not in rt.state:
        # Collective: every rank builds it in the same command.
        rt.state["exchange"] = make_head_exchange(None, rt.device) if rt.world_size > 1 else _SingleRank()
    return rt.state["exchange"]


class _SingleRank:
    name, rank, world_size = "none", 0, 1


@op(LoadModel)
def load_model(job, request: LoadModel) -> dict:
    """Load the checkpoint on every rank (skipped when the same file, dtype, mode and fp8 are loaded)."""
    path = Path(request.checkpoint)
    if not path.is_file():
        raise InputRejected(f"checkpoint {path} does not exist on this machine")
    dtype, mode = DTYPES[request.dtype], ForwardMode(request.mode)
    if request.backend == BACKEND_COMFY:
        return load_comfy(job, request, _exchange(job))
    compiled, fp8_matmul = request.compile, request.fp8_matmul
    rt = job.runtime
    try:  # refused before any weight loads: the GPU's fp8 support (the request checked the rest)
        if fp8_matmul:
            check_fp8_matmul(dtype, rt.device)
    except ValueError as exc:
        raise InputRejected(str(exc)) from None
    current = rt.state.get("model")
    if not isinstance(current, LoadedModel):
        current = None
    same = (current.path, current.dtype, current.mode, current.fp8_matmul) if current is not None else None
    if same == (path, dtype, mode, fp8_matmul):
        current.transformer.set_compiled(compiled)  # weights unchanged: only how the blocks run
        return {"reused": True, **_summary(current)}
    rt.state.pop("model", None)
    _release(rt.device)
    exchange = _exchange(job)
    parts = ["transformer", "text connectors"]
    job.progress(0, len(parts))
    try:
        model = LoadedModel.load(
            path,
            rt.device,
            dtype,
            exchange,
            mode,
            on_part=lambda p: job.progress(parts.index(p) + 1, len(parts)),
            fp8_matmul=fp8_matmul,
        )
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    except (SafetensorError, OSError) as exc:  # the header was fine (checked first); the data is not
        raise InputRejected(
            f"checkpoint {path} could not be read ({type(exc).__name__}: {exc}). The file is damaged or was "
            "changed while loading; download or copy it again."
        ) from exc
    model.transformer.set_compiled(compiled)
    rt.state["model"] = model
    return {"reused": False, **_summary(model)}


@op(SetCompiled)
def set_compiled(job, request: SetCompiled) -> dict:
    """Switch torch.compile of the loaded transformer's blocks on or off (benchmarks)."""
    model: LoadedModel | None = job.runtime.state.get("model")
    if model is None:
        raise InputRejected("no model loaded; load one first")
    try:
        model.transformer.set_compiled(request.compile)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    return {"compiled": model.transformer.compiled}


@op(UnloadModel)
def unload_model(job, request: UnloadModel) -> dict:
    job.runtime.state.pop("model", None)
    _release(job.runtime.device)
    return {}


def _summary(model: LoadedModel) -> dict:
    d = model.description
    return {
        "num_layers": d.num_layers,
        "video_heads": d.video_num_heads,
        "audio_heads": d.audio_num_heads,
        "caption_channels": d.caption_channels,
    }


def _release(device: torch.device) -> None:
    gc.collect()
    comfy_models = sys.modules.get("comfy.model_management")
    if comfy_models is not None:  # ComfyUI keeps weak references to models it loaded: drop the dead ones
        comfy_models.cleanup_models()
    if device.type == "cuda":
        torch.cuda.empty_cache()
