"""The TDP stage on the comfy backend: ComfyUI's sampler over the whole upscaled latent, its model
call tiled (tiled_cond_batch.TiledCondBatch), on every rank in lockstep.

What native ComfyUI computes for stage 2 (LTXVLatentUpsampler -> LTXVConcatAVLatent with the held
stage-1 audio -> SamplerCustomAdvanced with CFGGuider), with one change: each model call runs per
tile. The sampling is the comfy backend's (sampling.sample, SamplerCustomAdvanced's loop). The
noise is drawn once for the whole latent from the seed, as native draws it, and each
model call sees its tile's cut of the noised latent, so one tile with overlap 0 is native stage 2.
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...strategies import tiled
from ...strategies.tdp_preview import PreviewRegion
from .model import ComfyModel
from .node_patches import make_live
from .sampling import StepCallback, sample
from .sequence_parallel import SequenceParallel
from .sharded_lockstep import Lockstep
from .tdp_region import RegionCondBatch, region_shapes
from .tiled_cond_batch import Reduce, TiledCondBatch, check_conditioning

# The key our wrapper is registered under on the sampling clone of the ModelPatcher.
WRAPPER_KEY = "ltx2_mgpu_tdp"


def held_audio_latent(video: torch.Tensor, audio: torch.Tensor | None) -> dict:
    """The stage-2 LATENT as LTXVConcatAVLatent builds it from the upscaled video and the stage-1
    audio with noise mask 0: the sampler holds the audio at its input (LTXAV's inpaint keeps the
    clean latent) and the model hears it at timestep 0; the video is denoised (mask 1)."""
    import comfy.nested_tensor

    if audio is None:
        return {"samples": video}
    nested = comfy.nested_tensor.NestedTensor
    return {
        "samples": nested((video, audio)),
        "noise_mask": nested((torch.ones_like(video), torch.zeros_like(audio))),
    }


def denoise_tiled(
    model: ComfyModel,
    latent: dict,
    positive: list,
    negative: list | None,
    sigmas: torch.Tensor,
    sampler_name: str,
    cfg: float,
    seed: int,
    grid: tiled.TileGrid,
    *,
    rank: int,
    world_size: int,
    reduce: Reduce,
    callback: StepCallback | None = None,
    lockstep: Lockstep | None = None,
    region: PreviewRegion | None = None,
    agree: Callable[[Any], None] | None = None,
) -> dict:
    """`latent` (a LATENT dict, video or AV nested, video first) denoised along `sigmas` with the
    model call tiled over `grid`; returns the LATENT the sampler gives. With a preview `region` only
    that part of the video is computed (tdp_region.py; the rest of the returned latent is the noised
    input). Collective (one `reduce` per model call, or the centre tile's sequence-parallel forward);
    identical on every rank. ValueError (before any collective) for conditioning a tile cannot carry.
    `lockstep`: the sharded model's (NOTE [sharded lockstep]), else None. `agree(patcher)`: makes ComfyUI
    batch cond and uncond alike on every rank (sample_job.agree_batching), where the forwards are
    collective and must match: the centre tile's sequence-parallel calls, every call under weights layers."""
    check_conditioning(positive, "positive")
    check_conditioning(negative, "negative")
    import comfy.patcher_extension

    samples = latent["samples"]
    shapes = [t.shape for t in samples.unbind()] if samples.is_nested else [samples.shape]
    make_live(model, model.patcher)  # a group MODEL call may have left a LoRA node's patches in the weights
    if region is not None and region.tile is not None:
        # The whole group on the one tile: its tokens split over the ranks (every rank runs each forward).
        parallel = SequenceParallel.for_model(model.extras["exchange"], model.diffusion_model)
        patcher = parallel.patch(model.patcher)
        if agree is not None:
            agree(patcher)
        wrapper = RegionCondBatch(region, shapes)
    else:
        patcher = model.patcher.clone()
        if agree is not None:  # weights layers: every forward is collective
            agree(patcher)
        tiled_shapes = shapes if region is None else region_shapes(region, shapes)
        wrapper = TiledCondBatch(
            grid, tiled_shapes, rank=rank, world_size=world_size, reduce=reduce, lockstep=lockstep
        )
        if region is not None:
            wrapper = RegionCondBatch(region, shapes, inner=wrapper)
    patcher.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.CALC_COND_BATCH, WRAPPER_KEY, wrapper)
    with torch.inference_mode():
        return sample(
            patcher, positive, [] if negative is None else negative,  # none: cfg 1, no uncond pass
            latent, sigmas, sampler_name, cfg, seed, callback=callback,
        )  # fmt: skip
