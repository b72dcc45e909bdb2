"""The "encode_gemma4" command for LTX-2.5's Gemma 4 text encoder, on the comfy backend.

ComfyUI's own encoder (engine/comfy/gemma4_text.py) runs, as CLIPTextEncode runs it, either
- whole on rank 0 (placement "rank 0"), the other ranks holding nothing and waiting, or
- with its layers spread over the group (placement "layers"): rank r holds a contiguous block of
  Gemma's layers, every rank runs ComfyUI's encode and relays hidden states between ranks inside
  its layer loop (engine/comfy/gemma4_layer_split.py); rank 0 writes the result.
Request placement "auto" runs it whole on rank 0 when the file, with headroom, fits rank 0's free
memory, else split; "replicas" (one prompt: one copy runs) is rank 0; "layers" splits. The CONDITIONING
is bit for bit the same either way on one device type. The encoder stays resident in the model's
extras, keyed by file version and placement. The request is wire/requests.EncodeGemma4; every rank
replies its placement and held layers, rank 0 also {"tokens": n}.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import torch

from ..engine.comfy.model import ComfyModel
from ..wire.model_files import read_safetensors_header
from ..wire.requests import EncodeGemma4
from .ops import InputRejected, op
from .ops_text import REPLICA_HEADROOM, free_bytes, split_layers

GEMMA4_KEY = "comfy_gemma4_text_encoder"
WHOLE, LAYERS = "rank 0", "layers"


@op(EncodeGemma4)
def encode_gemma4(job, request: EncodeGemma4) -> dict:
    rt = job.runtime
    model = rt.state.get("model")
    path = Path(request.text_encoder)
    if not isinstance(model, ComfyModel):
        raise InputRejected(
            f"{path.name} is Gemma 4 (LTX-2.5), which runs on the comfy backend only (ComfyUI's own encoder); "
            "load the model inside ComfyUI with MGPU Loader mode comfyui"
        )
    if not path.is_file():
        raise InputRejected(f"text encoder {path} does not exist on this machine")
    out = request.outputs[0]
    began = time.perf_counter()
    placement, blocks = _plan(job, path, request.placement)
    clip = _cached_encoder(job, model, path, placement, blocks)
    load_s = time.perf_counter() - began
    reply = {
        "placement": placement,
        "layers": _held(clip),
        "weight_bytes": _weight_bytes(clip),
        "load_s": load_s,
    }
    if clip is None:
        return reply
    began = time.perf_counter()
    from ..engine.comfy.gemma4_text import encode

    with torch.inference_mode():
        tensor = encode(clip, request.text)
    if job.rank != 0:
        return reply | {"encode_s": time.perf_counter() - began}
    tokens = tensor.shape[1]
    # The node sized the slot from the prompt's bytes, an upper bound on Gemma's tokens.
    assert tensor.shape[2] == out.shape[2] and tokens <= out.shape[1], (tuple(tensor.shape), tuple(out.shape))
    out[:, :tokens].copy_(tensor)
    return reply | {"tokens": tokens, "encode_s": time.perf_counter() - began}


def _plan(job, path: Path, wanted: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """What runs where, alike on every rank: (placement, every rank's layer block; () when whole)."""
    world = job.world_size
    if world == 1 or wanted == "replicas":
        return WHOLE, ()
    free = free_bytes(job)  # collective: every rank takes this branch
    if wanted == "auto" and path.stat().st_size * REPLICA_HEADROOM <= free[0][1]:
        return WHOLE, ()
    layers = _num_layers(path)
    if world > layers:
        raise InputRejected(
            f"{world} ranks but the text encoder {path.name} has {layers} layers; use placement 'replicas'"
        )
    if all(device == "cpu" for device, _ in free):  # one shared memory: split evenly
        return LAYERS, split_layers(layers, [1] * world)
    return LAYERS, split_layers(layers, [f for _, f in free])


def _num_layers(path: Path) -> int:
    keys = read_safetensors_header(path).shapes
    return 1 + max(int(k.split(".")[2]) for k in keys if k.startswith("model.layers."))


def _cached_encoder(job, model: ComfyModel, path: Path, placement: str, blocks: tuple):
    """This rank's comfy.sd.CLIP (None where it holds nothing), loaded now unless resident."""
    stamp = (str(path), path.stat().st_mtime_ns, path.stat().st_size, placement, blocks)
    cached = model.extras.get(GEMMA4_KEY)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    model.extras.pop(GEMMA4_KEY, None)
    cached = None
    gc.collect()
    if job.runtime.device.type == "cuda":
        torch.cuda.empty_cache()
    clip = _load(job, path, blocks)
    model.extras[GEMMA4_KEY] = (stamp, clip)
    return clip


def _load(job, path: Path, blocks: tuple):
    from ..engine.comfy.gemma4_layer_split import LayerSplit
    from ..engine.comfy.gemma4_text import load_gemma4_text_encoder

    device = job.runtime.device
    if not blocks:
        return load_gemma4_text_encoder(path, device) if job.rank == 0 else None
    try:
        return load_gemma4_text_encoder(path, device, LayerSplit(job.rank, blocks))
    except ValueError as exc:  # a Gemma 4 whose layers take more than x (check_splittable)
        raise InputRejected(str(exc)) from exc


def _weight_bytes(clip) -> dict[str, int]:
    from ..engine.comfy.gemma4_layer_split import weight_bytes

    return weight_bytes(clip.cond_stage_model) if clip is not None else {"layers": 0, "other": 0}


def _held(clip) -> list[int]:
    """Layers whose weights this rank holds."""
    if clip is None:
        return []
    from ..engine.comfy.gemma4_layer_split import held_layers

    return held_layers(clip.cond_stage_model.gemma3_12b.transformer.model)
