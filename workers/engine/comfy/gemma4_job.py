"""The "encode_gemma4" command for LTX-2.5's Gemma 4 text encoder, on ComfyUI's engine.

ComfyUI's own encoder (engine/comfy/gemma4_text.py) runs, as CLIPTextEncode runs it, either
- whole on rank 0 (placement "rank 0"), the other ranks holding nothing and waiting, or
- with its layers spread over the group (placement "layers"): rank r holds a contiguous block of
  Gemma's layers, every rank runs ComfyUI's encode and relays hidden states between ranks inside
  its layer loop (engine/comfy/gemma4_layer_split.py); rank 0 writes the result.
Request placement "auto" runs it whole on rank 0 when the file, with headroom, fits rank 0's free
memory, else split; "replicas" (one prompt: one copy runs) is rank 0; "layers" splits. The CONDITIONING
is bit for bit the same either way on one device type. The encoder stays resident in the model's
extras for its file version; "auto" keeps the resident one, another placement reloads. The request is wire/requests.EncodeGemma4; every rank
replies its placement and held layers, rank 0 also {"tokens": n}.
"""

from __future__ import annotations

import gc
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...text.placement import REPLICA_HEADROOM, free_bytes, split_layers
from ...wire.memory_plan import SAFETENSORS_ITEM_BYTES
from ...wire.model_files import read_safetensors_header
from ...wire.requests import EncodeGemma4
from ..protocol import InputRejected, Job
from .model import ComfyModel

GEMMA4_KEY = "comfy_gemma4_text_encoder"
WHOLE, LAYERS = "rank 0", "layers"
PLACEMENT_RUN = {"replicas": WHOLE, "layers": LAYERS}  # a request's placement -> what runs
LAYER_PREFIX = "model.layers."


def encode_gemma4(job: Job, model: ComfyModel, request: EncodeGemma4) -> dict:
    path = Path(request.text_encoder)
    if not path.is_file():
        raise InputRejected(f"text encoder {path} does not exist on this machine")
    out = request.outputs[0]
    began = time.perf_counter()
    resident = _resident(job, model, path, request.placement)
    clip = resident.clip
    load_s = time.perf_counter() - began
    reply = {
        "placement": resident.placement,
        "layers": _held(clip),
        "weight_bytes": _weight_bytes(clip),
        "load_s": load_s,
    }
    if clip is None:
        return reply
    began = time.perf_counter()
    from .gemma4_text import encode

    with torch.inference_mode():
        tensor = encode(clip, request.text)
    if job.rank != 0:
        return reply | {"encode_s": time.perf_counter() - began}
    tokens = tensor.shape[1]
    # The node sized the slot from the prompt's bytes, an upper bound on Gemma's tokens.
    assert tensor.shape[2] == out.shape[2] and tokens <= out.shape[1], (tuple(tensor.shape), tuple(out.shape))
    out[:, :tokens].copy_(tensor)
    return reply | {"tokens": tokens, "encode_s": time.perf_counter() - began}


@dataclass(frozen=True)
class ResidentGemma4:
    """The encoder as this rank holds it: clip None where it holds nothing (placement "rank 0", ranks > 0);
    blocks: every rank's [start, stop) layers for "layers", () otherwise."""

    file_id: tuple
    placement: str
    blocks: tuple[tuple[int, int], ...]
    clip: Any


def _resident(job, model: ComfyModel, path: Path, wanted: str) -> ResidentGemma4:
    """The resident encoder when it serves `wanted`, else the one loaded now. The same on every rank:
    all ranks keep the same record. "auto" keeps whatever is resident for the file: deciding again
    would measure free memory that the resident encoder itself takes."""
    file_id = (str(path), path.stat().st_mtime_ns, path.stat().st_size)
    current: ResidentGemma4 | None = model.extras.get(GEMMA4_KEY)
    if current is not None and current.file_id == file_id:
        if wanted == "auto" or job.world_size == 1 or PLACEMENT_RUN[wanted] == current.placement:
            return current
    model.extras.pop(GEMMA4_KEY, None)
    current = None
    gc.collect()
    if job.device.type == "cuda":
        torch.cuda.empty_cache()
    placement, blocks = _plan(job, path, wanted)
    with torch.inference_mode():  # as ComfyUI's executor runs CLIPLoader (int8 layers move only so)
        clip = _load(job, path, blocks)
    resident = ResidentGemma4(file_id, placement, blocks, clip)
    model.extras[GEMMA4_KEY] = resident
    return resident


def _plan(job, path: Path, wanted: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """What runs where, alike on every rank: (placement, every rank's layer block; () when whole)."""
    world = job.world_size
    if world == 1 or wanted == "replicas":
        return WHOLE, ()
    free = free_bytes(job)  # collective: every rank takes this branch
    if wanted == "auto" and path.stat().st_size * REPLICA_HEADROOM <= free[0][1]:
        return WHOLE, ()
    header = read_safetensors_header(path)
    layers = 1 + max(int(k.split(".")[2]) for k in header.shapes if k.startswith(LAYER_PREFIX))
    if world > layers:
        raise InputRejected(
            f"{world} ranks but the text encoder {path.name} has {layers} layers; use placement 'replicas'"
        )
    if all(device == "cpu" for device, _ in free):  # one shared memory: split evenly
        return LAYERS, split_layers(layers, [1] * world)
    if sum(f for _, f in free) < path.stat().st_size:
        raise InputRejected(
            f"the text encoder {path.name} needs {path.stat().st_size / 2**30:.1f} GiB but the group's GPUs have "
            f"{sum(f for _, f in free) / 2**30:.1f} GiB free together; use more GPUs or free memory"
        )
    # Rank 0 also holds everything outside the layers (embedding, LTX projection, media embedders).
    outside = sum(
        math.prod(shape) * SAFETENSORS_ITEM_BYTES.get(header.dtypes[k], 1)
        for k, shape in header.shapes.items()
        if not k.startswith(LAYER_PREFIX)
    )
    return LAYERS, split_layers(layers, [f - (outside if r == 0 else 0) for r, (_, f) in enumerate(free)])


def _load(job, path: Path, blocks: tuple):
    from .gemma4_layer_split import LayerSplit
    from .gemma4_text import load_gemma4_text_encoder

    device = job.device
    if not blocks:
        return load_gemma4_text_encoder(path, device) if job.rank == 0 else None
    try:
        return load_gemma4_text_encoder(path, device, LayerSplit(job.rank, blocks))
    except ValueError as exc:  # a Gemma 4 whose layers take more than x (check_splittable)
        raise InputRejected(str(exc)) from exc


def _weight_bytes(clip) -> dict[str, int]:
    from .gemma4_layer_split import weight_bytes

    return weight_bytes(clip.cond_stage_model) if clip is not None else {"layers": 0, "other": 0}


def _held(clip) -> list[int]:
    """Layers whose weights this rank holds."""
    if clip is None:
        return []
    from .gemma4_layer_split import held_layers

    return held_layers(clip.cond_stage_model.gemma3_12b.transformer.model)
