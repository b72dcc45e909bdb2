"""The TDP Upscaler's job on the ltx-core engine: upsample a stage-1 latent 2x and denoise it with tiled
data parallelism over the plan the handler made (strategies/tdp_plan.py).

Geometry: NOTE [tdp tiles] and NOTE [blend weights] in strategies/tiled.py. Per job, on every rank:
  1. upsample the stage-1 video latent with ltx-core's latent upsampler between the VAE's per-channel
     statistics (un-normalise -> upsample -> normalise, as LTXVLatentUpsampler does), then take rank
     0's copy so every rank starts from the same bits;
  2. run the same sampling loop as the SP Sampler (sampling.sample) with `TiledDenoiser` as the model
     call: per step each rank runs the whole transformer (no sequence parallelism) on each of its
     tiles, applies CFG per tile (engine.AVDenoiser, one per tile), weights the result by the tile's
     blend mask into a full-size buffer, and one all_reduce(SUM) makes it the full denoised video;
  3. the stage-1 audio rides along as clean context: its noise mask is 0, so the sampler holds it at
     the input latent and the model sees it at timestep 0. It is never output: the node returns the
     stage-1 audio tensor itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
from ltx_core.model.transformer.modality import Modality

from ...strategies import tiled
from ...strategies.tdp_plan import TdpPlan
from ...strategies.tdp_preview import PreviewRegion, RegionDenoiser
from ...strategies.tdp_preview import audio_frames as preview_audio_frames
from ...wire.requests import TdpUpscale
from ..protocol import InputRejected, Job
from . import latents, sampling
from .conditioning import TextContext
from .model import AVDenoiser, Guidance, LoadedModel
from .model_forward import run_transformer
from .sample_job import audio_timing, text_context
from .sequence_parallel import SequenceParallelModel, SplitAttention
from .tdp_upsample import spatial_upsampler, upsample_video, video_statistics

Reduce = Callable[[torch.Tensor], None]


@contextlib.contextmanager
def full_attention(transformer: SequenceParallelModel) -> Iterator[None]:
    """While inside, the wrapped model's attentions run unsharded on this rank alone (TDP runs the
    whole transformer per tile); the sequence-parallel attention functions are put back on exit."""
    swapped = []
    for block in transformer.model.transformer_blocks:
        for name in ("attn1", "video_to_audio_attn"):
            attention = getattr(block, name, None)
            function = getattr(attention, "attention_function", None)
            if isinstance(function, SplitAttention):
                swapped.append((attention, function))
                attention.attention_function = function.inner
    try:
        yield
    finally:
        for attention, function in swapped:
            attention.attention_function = function


class LocalTransformer:
    """The rank-local forward of a SequenceParallelModel (call it inside `full_attention`)."""

    def __init__(self, transformer: SequenceParallelModel) -> None:
        self.transformer = transformer

    def __call__(
        self, video: Modality | None, audio: Modality | None, perturbations: object | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if perturbations is not None:
            raise NotImplementedError("perturbed (STG) forwards are not supported by the worker path")
        return run_transformer(self.transformer.model, video, audio, self.transformer.mode)


class TiledDenoiser:
    """The sampler's model call for TDP (sampling.Denoiser). Collective: one all_reduce per call.

    xs: [video [B,C,F,H,W], audio [B,8,T,16]?] replicated on every rank; returns the full denoised
    video (identical on every rank) and, for audio, the held input (the sampler keeps it anyway).
    """

    def __init__(
        self,
        model: LoadedModel,
        positive: TextContext,
        negative: TextContext | None,
        guidance: Guidance,
        grid: tiled.TileGrid,
        video_shape: tuple[int, ...],
        audio_shape: tuple[int, ...] | None,
        frame_rate: float,
        timing: latents.AudioTiming,
        device: torch.device,
        *,
        rank: int,
        world_size: int,
        reduce: Reduce,
    ) -> None:
        self.transformer = model.transformer
        self.grid = grid
        self.video_shape = tuple(video_shape)
        self.device = device
        self.reduce = reduce
        local = dataclasses.replace(model, transformer=LocalTransformer(model.transformer))
        self.work: list[tuple[tiled.Tile, AVDenoiser, torch.Tensor]] = []
        for tile in grid.for_rank(rank, world_size):
            denoiser = tile_denoiser(
                local, positive, negative, guidance, self.video_shape, tile, audio_shape, frame_rate, timing, device
            )  # fmt: skip
            self.work.append((tile, denoiser, tile.blend_mask(torch.float32, device)))

    def __call__(
        self, xs: list[torch.Tensor], sigma: float, masks: list[torch.Tensor | None]
    ) -> list[torch.Tensor]:
        video = xs[0]
        blended = torch.zeros(self.video_shape, dtype=torch.float32, device=self.device)
        with full_attention(self.transformer):
            for tile, denoiser, weight in self.work:
                tile_masks = [_cut_mask(tile, masks[0], video), *masks[1:]]
                out = denoiser([tile.cut(video), *xs[1:]], sigma, tile_masks)
                tile.cut(blended).add_(out[0] * weight)
        self.reduce(blended)
        return [blended, *xs[1:]]


def tile_denoiser(
    model: LoadedModel,
    positive: TextContext,
    negative: TextContext | None,
    guidance: Guidance,
    video_shape: tuple[int, ...],
    tile: tiled.Tile,
    audio_shape: tuple[int, ...] | None,
    frame_rate: float,
    timing: latents.AudioTiming,
    device: torch.device,
) -> AVDenoiser:
    """The model call of one tile of a video latent of `video_shape`: engine.AVDenoiser over the
    tile's shape, with the positions the tile's cells have in the whole video, shifted to start at
    zero (NOTE [tdp tiles]). `model.transformer` decides who runs it: a LocalTransformer (this rank
    alone, inside `full_attention`) or the SequenceParallelModel (the tile split over the group)."""
    shape = torch.Size(tile.shape(video_shape))
    denoiser = AVDenoiser(model, positive, negative, guidance, shape, audio_shape, frame_rate, device, timing)
    full_positions = latents.video_positions(
        video_shape, frame_rate, causal_fix=model.causal_positions, device=device
    )
    positions = tiled.shift_to_origin(
        tiled.tile_positions(full_positions, video_shape, tile), num_generated=shape[2:].numel()
    )
    denoiser.video_positions = positions.repeat(denoiser.copies, 1, 1, 1)
    return denoiser


def _cut_mask(tile: tiled.Tile, mask: torch.Tensor | None, video: torch.Tensor) -> torch.Tensor | None:
    """The tile's part of a 5-d noise mask broadcastable to the video (e.g. per-frame [B,1,F,1,1])."""
    if mask is None:
        return None
    b, _, f, h, w = video.shape
    return tile.cut(mask.expand(b, mask.shape[1], f, h, w))


def all_reduce_sum(world_size: int) -> Reduce:
    if world_size == 1:
        return lambda tensor: None
    return lambda tensor: dist.all_reduce(tensor, op=dist.ReduceOp.SUM)


def _held_audio(audio: torch.Tensor | None) -> list[sampling.Stream]:
    """The audio stream with noise mask 0: never denoised, seen by the model as clean context."""
    return [] if audio is None else [sampling.Stream(audio, torch.zeros(1, 1, 1, 1))]


def _run_stage(
    denoiser: sampling.Denoiser,
    video: torch.Tensor,
    audio: torch.Tensor | None,
    args: dict,
    device: torch.device,
    on_step: sampling.StepCallback | None,
    on_denoised: sampling.StepCallback | None = None,
) -> torch.Tensor:
    """Re-noise `video` to the first sigma (noise from the seed, as ComfyUI draws it: video, then
    audio) and run the SP Sampler's loop with `denoiser`; the final video, float32 on `device`."""
    streams = [sampling.Stream(video, None), *_held_audio(audio)]
    seed = int(args["seed"])
    noise = sampling.initial_noise(seed, [s.latent.shape for s in streams])
    settings = sampling.SamplerSettings(name=str(args["sampler"]))
    with torch.inference_mode():
        out = sampling.sample(
            denoiser,
            streams,
            noise,
            args["sigmas"].float(),
            settings,
            seed=seed,
            device=device,
            on_step=on_step,
            on_denoised=on_denoised,
        )
    return out[0]


def denoise_upscaled(
    model: LoadedModel,
    video: torch.Tensor,
    audio: torch.Tensor | None,
    positive: TextContext,
    negative: TextContext | None,
    grid: tiled.TileGrid,
    args: dict,
    *,
    rank: int,
    world_size: int,
    device: torch.device,
    on_step: sampling.StepCallback | None = None,
    region: PreviewRegion | None = None,
    on_denoised: sampling.StepCallback | None = None,
) -> torch.Tensor:
    """The TDP stage: `video` (upscaled) re-noised and denoised over `grid`; final video [B,C,F,H,W]
    float32 on `device`, or for a preview only `region` of it (NOTE [tdp preview]), region.shape.
    Collective when world_size > 1; the result is identical on every rank.
    args: cfg, frame_rate, seed, sampler, sigmas."""
    cfg = float(args["cfg"])
    guidance, audio_shape = Guidance(cfg, cfg), None if audio is None else tuple(audio.shape)
    frame_rate, timing = float(args["frame_rate"]), audio_timing(model)
    if region is not None and region.tile is not None:
        # The whole group on the one tile: SequenceParallelModel splits its tokens over the ranks.
        inner: sampling.Denoiser = tile_denoiser(
            model, positive, negative, guidance, region.frames_shape, region.tile, audio_shape, frame_rate,
            timing, device,
        )  # fmt: skip
    else:
        inner = TiledDenoiser(
            model, positive, negative, guidance, grid, tuple(video.shape) if region is None else region.frames_shape,
            audio_shape, frame_rate, timing, device, rank=rank, world_size=world_size,
            reduce=all_reduce_sum(world_size),
        )  # fmt: skip
    if region is None:
        return _run_stage(inner, video, audio, args, device, on_step, on_denoised)
    out = _run_stage(RegionDenoiser(inner, region), video, audio, args, device, on_step, on_denoised)
    return region.cut(out).contiguous()


def denoise_untiled(
    model: LoadedModel,
    video: torch.Tensor,
    audio: torch.Tensor | None,
    positive: TextContext,
    negative: TextContext | None,
    args: dict,
    *,
    device: torch.device,
) -> torch.Tensor:
    """The same stage with the plain model call (engine.AVDenoiser) over the whole frame, on one
    rank: what TDP is measured against (tests, bench/bench_tdp.py)."""
    cfg = float(args["cfg"])
    denoiser = AVDenoiser(
        model, positive, negative, Guidance(cfg, cfg), video.shape,
        None if audio is None else audio.shape, float(args["frame_rate"]), device, audio_timing(model),
    )  # fmt: skip
    return _run_stage(denoiser, video, audio, args, device, None)


def tdp_upscale(model: LoadedModel, job: Job, request: TdpUpscale, plan: TdpPlan) -> dict:
    """The engine's part of the tdp_upscale reply: `audio_frames`, how many stage-1 audio frames go
    with the result (a first-frames preview is shorter)."""
    try:
        positive = text_context(model, request.positive, job.device, "positive")
        negative = text_context(model, request.negative, job.device, "negative")
        statistics = video_statistics(model, job.device)
        upsampler = spatial_upsampler(model, request.upscaler, job.device)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    video = upsample_video(request.video, upsampler, statistics, model.dtype)
    if job.world_size > 1:
        with torch.inference_mode():
            dist.broadcast(video, src=0)  # one source of truth: every rank steps the same latent

    on_denoised, on_step = job.step_callbacks(request.live_preview)

    job.check_cancel()
    stage = request.to_wire()  # the stage settings as the stage functions (and tests) read them
    result = denoise_upscaled(
        model, video, request.audio, positive, negative, plan.grid, stage,
        rank=job.rank, world_size=job.world_size, device=job.device, on_step=on_step, region=plan.region,
        on_denoised=on_denoised,
    )  # fmt: skip
    if job.rank == 0:
        request.out_video.copy_(result.to(request.out_video.dtype))
    return {"audio_frames": _audio_frames_out(request, plan.region, model)}


def _audio_frames_out(request: TdpUpscale, region: PreviewRegion | None, model: LoadedModel) -> int | None:
    """Stage-1 audio frames the node returns: all, or as long as a first-frames preview lasts."""
    audio = request.audio
    if audio is None:
        return None
    if region is None:
        return int(audio.shape[2])
    lps = audio_timing(model).latent_frames_per_second
    return preview_audio_frames(region, int(audio.shape[2]), request.frame_rate, lps)
