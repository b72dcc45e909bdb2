"""The TDP Upscaler's job on ComfyUI's engine: the request's plan (strategies/tdp_plan.py, made by the
handler) run with ComfyUI's latent upsampler (latent_upsample.py) and its sampler with the model call
tiled (tdp.py), or for a preview cut to the preview's region (tdp_region.py). Per job, on every rank:
  1. upsample the stage-1 video as LTXVLatentUpsampler does, then take rank 0's copy so every rank
     starts from the same bits;
  2. build the stage-2 LATENT as LTXVConcatAVLatent does, the stage-1 audio held (noise mask 0);
  3. run ComfyUI's sampler on it, every model call tiled and summed over the group (a centre-tile
     preview: the one tile split over the group).
Rank 0 writes the video (or the preview's region of it) into the output slot; the node returns the
stage-1 audio itself (cut to a first-frames preview's length). Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from ...strategies.tdp_plan import TdpPlan, tdp_reply
from ...strategies.tdp_preview import audio_frames as preview_audio_frames
from ...wire.model_files import describe_checkpoint
from ...wire.requests import TdpUpscale
from ..protocol import InputRejected, Job
from .latent_upsample import (
    cached_latent_upsampler,
    keep_upsampled,
    upsample_video,
    upsampled_from_before,
    video_statistics,
)
from .model import ComfyModel
from .sample_job import agree_batching, conditioning
from .sharded_lockstep import lockstep_for
from .tdp import denoise_tiled, held_audio_latent
from .tiled_cond_batch import check_conditioning


def tdp_upscale(model: ComfyModel, job: Job, request: TdpUpscale, plan: TdpPlan) -> dict:
    """The engine's part of the tdp_upscale reply: audio_frames (stage-1 audio frames that go with the
    result) and padding_forwards (sharded weights)."""
    from .layer_split import layer_range

    try:
        positive = conditioning(request.positive, request.frame_rate)
        negative = conditioning(request.negative, request.frame_rate)
        check_conditioning(positive, "positive")
        check_conditioning(negative, "negative")
        video_statistics(model)
        upsampler, upsampler_reused = cached_latent_upsampler(model, Path(request.upscaler), job.device)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    video = upsampled_from_before(model, Path(request.upscaler), request.video)
    upsampled_reused = _on_every_rank(video is not None, job)
    if not upsampled_reused:
        video = upsample_video(model, upsampler, request.video).to(job.device)
        if job.world_size > 1:
            with torch.inference_mode():
                dist.broadcast(video, src=0)  # one source of truth: every rank steps the same latent
        keep_upsampled(model, Path(request.upscaler), request.video, video)
    audio = request.audio
    latent = held_audio_latent(video, None if audio is None else audio.to(job.device))

    on_denoised, on_step = job.step_callbacks(request.live_preview)

    def callback(step: int, total: int, x0: list[torch.Tensor], x: list[torch.Tensor]) -> None:
        on_denoised(step, total, x0)  # the live preview of the blended video
        on_step(step + 1, total, x)  # progress, and Cancel agreed at the step boundary

    job.check_cancel()
    # NOTE [layers]: every forward runs on the whole group (each rank its range of the blocks), so every
    # rank runs every tile, one after another, as one rank would; ComfyUI's batching of cond and uncond
    # then has to agree between ranks (the hand-overs are collectives).
    layered = layer_range(model.patcher.model) is not None
    tile_rank, tile_ranks = (0, 1) if layered else (job.rank, job.world_size)
    # sharded: ranks with fewer tiles pad their gathers (NOTE [sharded lockstep])
    lockstep = None if plan.centre_tile_only else lockstep_for(model)
    padded = 0 if lockstep is None else lockstep.padded
    collective_forwards = plan.centre_tile_only or layered
    out = denoise_tiled(
        model, latent, positive, negative, request.sigmas.float(), request.sampler, request.cfg,
        request.seed, plan.grid, rank=tile_rank, world_size=tile_ranks, reduce=all_reduce_sum(tile_ranks),
        callback=callback, lockstep=lockstep, region=plan.region,
        agree=(lambda patcher: agree_batching(job, patcher)) if collective_forwards else None,
    )  # fmt: skip
    samples = out["samples"]
    result = samples.unbind()[0] if samples.is_nested else samples
    if plan.region is not None:
        result = plan.region.cut(result)
    if job.rank == 0:
        request.out_video.copy_(result.to(request.out_video.dtype))
    return {
        **(tdp_reply(plan, request, 0, 1) if layered else {}),  # this rank ran every tile
        "audio_frames": None if audio is None else _audio_frames_out(model, request, plan),
        # Forwards this rank ran as gathers only to keep step with ranks that had more tiles (sharded).
        "padding_forwards": 0 if lockstep is None else lockstep.padded - padded,
        # What the warm loop skipped: loading the upscaler file, running it on the same stage-1 latent.
        "reused": {"upscaler": upsampler_reused, "upsampled_latent": upsampled_reused},
    }


def _on_every_rank(flag: bool, job: Job) -> bool:
    """True when `flag` holds on every rank (ranks that disagree all upsample again, together)."""
    if job.world_size == 1:
        return flag
    value = torch.tensor([int(flag)])
    dist.all_reduce(value, op=dist.ReduceOp.MIN, group=job.control_group)
    return bool(value.item())


def all_reduce_sum(world_size: int):
    if world_size == 1:
        return lambda tensor: None
    return lambda tensor: dist.all_reduce(tensor, op=dist.ReduceOp.SUM)


def _audio_frames_out(model: ComfyModel, request: TdpUpscale, plan: TdpPlan) -> int:
    """Stage-1 audio frames the node returns: all, or as long as a first-frames preview lasts (at the
    audio VAE's latent rate, as ComfyUI's num_of_latents_from_frames counts)."""
    total = int(request.audio.shape[2])
    if plan.region is None:
        return total
    rate = describe_checkpoint(model.vae_files.audio or model.path).audio_latent_rate_hz
    return preview_audio_frames(plan.region, total, request.frame_rate, rate)
