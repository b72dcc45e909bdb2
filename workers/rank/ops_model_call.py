"""Commands of native sampling on the group (the MGPU Loader's MODEL; NOTE [model call] in
workers/wire/model_call.py): ComfyModelCall (one diffusion-model call) and ComfyTextEmbeds (the text
connectors), both in workers/wire/requests.py; ComfyUI's engine serves them.
"""

from __future__ import annotations

from ..wire.requests import ComfyModelCall, ComfyTextEmbeds
from .ops import op


@op(ComfyModelCall)
def model_call(job, request: ComfyModelCall) -> dict:
    return job.engine.model_call(job, request)


@op(ComfyTextEmbeds)
def text_embeds(job, request: ComfyTextEmbeds) -> dict:
    return job.engine.text_embeds(job, request)
