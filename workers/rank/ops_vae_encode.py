"""The "vae_encode" command: IMAGE frames -> the normalised video latent, over the whole group.

The request: wire/requests.py VaeEncode (built by nodes/vae_encode.py, which crops as native VAEEncode
does). The band plan (strategies/vae_encode_plan.py) is the same on both engines; the engine encodes
its slabs with edge rows swapped between neighbours and writes them into the request's LATENT slot.
"""

from __future__ import annotations

import torch

from ..strategies.vae_encode_plan import EncodePlan, make_plan
from ..wire.requests import VaeEncode
from ..wire.vae_outputs import encoded_latent_shape as latent_shape
from .ops import InputRejected, op


def validate(request: VaeEncode, world_size: int) -> EncodePlan:
    """The band plan for this group, alike on every rank before any collective (the request checked
    the pixels)."""
    pixels, out = request.pixels, request.out_latent
    try:
        plan = make_plan(latent_shape(tuple(pixels.shape))[2:], world_size, request.temporal_frames)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    assert tuple(out.shape) == latent_shape(tuple(pixels.shape)), "LATENT slot of the wrong shape"
    assert out.dtype == torch.float32, "LATENT slot must be float32"
    return plan


@op(VaeEncode)
def vae_encode(job, request: VaeEncode) -> dict:
    engine = job.engine
    return engine.vae_encode(job, request, validate(request, job.world_size))
