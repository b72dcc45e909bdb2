"""The "tdp_upscale" command on the comfy backend (runtime.state["model"] is a ComfyModel).

The same request, checks, tile plan and result as ops_tdp (the ltx-core path); the work is
ComfyUI's: its latent upsampler (engine/comfy/latent_upsample.py), its model and sampler with the
model call tiled (engine/comfy/tdp.py). Per job, on every rank:
  1. upsample the stage-1 video as LTXVLatentUpsampler does, then take rank 0's copy so every rank
     starts from the same bits;
  2. build the stage-2 LATENT as LTXVConcatAVLatent does, the stage-1 audio held (noise mask 0);
  3. run ComfyUI's sampler on it, every model call tiled and summed over the group.
Rank 0 writes the video into the output slot; the node returns the stage-1 audio itself.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from ..engine.comfy.model import ComfyModel
from ..wire.requests import TdpUpscale
from . import ops_tdp
from .ops import InputRejected
from .ops_comfy import conditioning
from .preview import step_callbacks


def tdp_upscale_comfy(job, model: ComfyModel, request: TdpUpscale) -> dict:
    """Request and result as ops_tdp.tdp_upscale; the preview modes are not served on this backend yet."""
    from ..engine.comfy.latent_upsample import cached_latent_upsampler, upsample_video, video_statistics
    from ..engine.comfy.sharded_lockstep import lockstep_for
    from ..engine.comfy.tdp import denoise_tiled, held_audio_latent
    from ..engine.comfy.tiled_cond_batch import check_conditioning

    rt = job.runtime
    try:
        grid, up_shape, region = ops_tdp.validate(request)
        if region is not None:
            raise ValueError(
                "the TDP Upscaler's preview modes do not run on ComfyUI's model stack yet; set preview to off"
            )
        if tuple(request.out_video.shape) != up_shape:
            raise ValueError(f"output slot {tuple(request.out_video.shape)} != result shape {up_shape}")
        positive = conditioning(request.positive, request.frame_rate)
        negative = conditioning(request.negative, request.frame_rate)
        check_conditioning(positive, "positive")
        check_conditioning(negative, "negative")
        video_statistics(model)
        upsampler = cached_latent_upsampler(model, Path(request.upscaler), rt.device)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    video = upsample_video(model, upsampler, request.video).to(rt.device)
    if job.world_size > 1:
        with torch.inference_mode():
            dist.broadcast(video, src=0)  # one source of truth: every rank steps the same latent
    audio = request.audio
    latent = held_audio_latent(video, None if audio is None else audio.to(rt.device))

    on_denoised, on_step = step_callbacks(job, request.live_preview)

    def callback(step: int, total: int, x0: list[torch.Tensor], x: list[torch.Tensor]) -> None:
        on_denoised(step, total, x0)  # the live preview of the blended video, as on ltx-core
        on_step(step + 1, total, x)  # progress, and Cancel agreed at the step boundary

    job.check_cancel()
    lockstep = lockstep_for(
        model
    )  # sharded: ranks with fewer tiles pad their gathers (NOTE [sharded lockstep])
    padded = 0 if lockstep is None else lockstep.padded
    out = denoise_tiled(
        model, latent, positive, negative, request.sigmas.float(), request.sampler, request.cfg,
        request.seed, grid, rank=job.rank, world_size=job.world_size,
        reduce=ops_tdp.all_reduce_sum(job.world_size), callback=callback, lockstep=lockstep,
    )  # fmt: skip
    samples = out["samples"]
    result = samples.unbind()[0] if samples.is_nested else samples
    if job.rank == 0:
        request.out_video.copy_(result.to(request.out_video.dtype))
    result = ops_tdp.tdp_result(
        job, grid, up_shape, request, None, None if audio is None else int(audio.shape[2])
    )
    # Forwards this rank ran as gathers only to keep step with ranks that had more tiles (sharded).
    result["padding_forwards"] = 0 if lockstep is None else lockstep.padded - padded
    return result
