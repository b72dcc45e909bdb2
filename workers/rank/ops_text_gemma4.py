"""The "encode_gemma4" command for LTX-2.5's Gemma 4 text encoder: ComfyUI's own encoder over the group
(the engine's, engine/comfy/gemma4_job.py; the request is wire/requests.EncodeGemma4)."""

from __future__ import annotations

from ..wire.requests import EncodeGemma4
from .ops import op


@op(EncodeGemma4)
def encode_gemma4(job, request: EncodeGemma4) -> dict:
    return job.engine.encode_gemma4(job, request)
