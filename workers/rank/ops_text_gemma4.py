"""The "encode_text" command for LTX-2.5's Gemma 4 text encoder, on the comfy backend.

ComfyUI's own encoder (engine/comfy/gemma4_text.py) runs whole on rank 0, as CLIPTextEncode runs it;
the other ranks hold nothing and wait. Not spread over the group yet: Gemma 4 12B fits one GPU,
and its layer loop has no hook to cut it by layer without a hand copy. The request is
wire/requests.EncodeGemma4; rank 0 replies {"tokens": n}.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ..engine.comfy.model import ComfyModel
from ..wire.requests import EncodeGemma4
from .ops import InputRejected, op

GEMMA4_KEY = "comfy_gemma4_text_encoder"


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
    if job.rank != 0:
        return {}
    began = time.perf_counter()
    clip = _cached_encoder(model, path, rt.device)
    load_s = time.perf_counter() - began
    began = time.perf_counter()
    from ..engine.comfy.gemma4_text import encode

    with torch.inference_mode():
        tensor = encode(clip, request.text)
    tokens = tensor.shape[1]
    # The node sized the slot from the prompt's bytes, an upper bound on Gemma's tokens.
    assert tensor.shape[2] == out.shape[2] and tokens <= out.shape[1], (tuple(tensor.shape), tuple(out.shape))
    out[:, :tokens].copy_(tensor)
    return {
        "tokens": tokens,
        "load_s": load_s,
        "encode_s": time.perf_counter() - began,
        "placement": "rank 0",
    }


def _cached_encoder(model: ComfyModel, path: Path, device: torch.device):
    from ..engine.comfy.gemma4_text import load_gemma4_text_encoder

    stamp = (str(path), path.stat().st_mtime_ns, path.stat().st_size)
    cached = model.extras.get(GEMMA4_KEY)
    if cached is None or cached[0] != stamp:
        model.extras.pop(GEMMA4_KEY, None)
        model.extras[GEMMA4_KEY] = (stamp, load_gemma4_text_encoder(path, device))
    return model.extras[GEMMA4_KEY][1]
