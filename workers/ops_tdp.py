"""The "tdp_upscale" command: upsample a stage-1 latent 2x and denoise it with tiled data parallelism.

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
from ltx_core.model.video_vae.ops import PerChannelStatistics
from safetensors import safe_open

from . import latents, sampling
from .checkpoint import load_upsampler, read_checkpoint_config, read_safetensors_header
from .conditioning import TextContext
from .config import DEFAULT_MAX_VIDEO_TOKENS
from .engine import AVDenoiser, Guidance, LoadedModel
from .model_forward import run_transformer
from .ops import InputRejected, op
from .ops_sampling import loaded_model, text_context
from .strategies import tiled
from .strategies.sequence_parallel import SequenceParallelModel, VideoSelfAttention, VideoToAudioAttention

# Where the VAE's per-channel statistics sit in a full LTX-2 checkpoint (workers/checkpoint.py).
STATISTICS_PREFIX = "vae.per_channel_statistics."
_STATISTICS_KEY = "video_statistics"
_UPSAMPLER_KEY = "spatial_upsampler:"  # + file path: one upsampler cached per rank at a time
# From this first sigma on, every tile starts from pure noise and invents its own content.
PURE_NOISE_SIGMA = 1.0

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
            if isinstance(function, (VideoSelfAttention, VideoToAudioAttention)):
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
        full_positions = latents.video_positions(
            self.video_shape, frame_rate, causal_fix=model.causal_positions, device=device
        )
        self.work: list[tuple[tiled.Tile, AVDenoiser, torch.Tensor]] = []
        for tile in grid.for_rank(rank, world_size):
            shape = torch.Size(tile.shape(self.video_shape))
            denoiser = AVDenoiser(
                local, positive, negative, guidance, shape, audio_shape, frame_rate, device, timing
            )
            positions = tiled.shift_to_origin(
                tiled.tile_positions(full_positions, self.video_shape, tile), num_generated=shape[2:].numel()
            )
            denoiser.video_positions = positions.repeat(denoiser.copies, 1, 1, 1)
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


def video_statistics(model: LoadedModel, device: torch.device) -> PerChannelStatistics:
    """The video VAE's per-channel statistics from the loaded checkpoint (cached in model.extras)."""
    cached = model.extras.get(_STATISTICS_KEY)
    if cached is not None:
        return cached
    header = read_safetensors_header(model.path)
    names = ("mean-of-means", "std-of-means")
    missing = [STATISTICS_PREFIX + n for n in names if STATISTICS_PREFIX + n not in header.shapes]
    if missing:
        raise ValueError(
            f"{model.path} holds no video VAE statistics ({', '.join(missing)}); the TDP Upscaler needs them "
            "to upsample. Load a full LTX-2 checkpoint (with its VAE) in the MGPU Loader."
        )
    statistics = PerChannelStatistics(latent_channels=header.shapes[STATISTICS_PREFIX + names[0]][0])
    with safe_open(str(model.path), framework="pt", device="cpu") as f:
        for name in names:
            statistics.register_buffer(name, f.get_tensor(STATISTICS_PREFIX + name).to(torch.float32))
    model.extras[_STATISTICS_KEY] = statistics.to(device).eval()
    return model.extras[_STATISTICS_KEY]


def spatial_upsampler(model: LoadedModel, path: str, device: torch.device) -> torch.nn.Module:
    """ltx-core's latent upsampler from `path` in the model's dtype, loaded once per rank (kept in
    model.extras until another upscaler file is asked for)."""
    key = _UPSAMPLER_KEY + path
    if key not in model.extras:
        for stale in [k for k in model.extras if k.startswith(_UPSAMPLER_KEY)]:
            del model.extras[stale]
        model.extras[key] = load_upsampler(path, device, model.dtype)
    return model.extras[key]


def upsample_video(
    video: torch.Tensor, upsampler: torch.nn.Module, statistics: PerChannelStatistics, dtype: torch.dtype
) -> torch.Tensor:
    """Normalised latent [B,C,F,H,W] -> normalised latent [B,C,F,2H,2W] float32, computed in `dtype`
    on the upsampler's device (un-normalise -> upsample -> normalise, as LTXVLatentUpsampler)."""
    device = next(upsampler.parameters()).device
    with torch.inference_mode():
        x = statistics.un_normalize(video.to(device=device, dtype=dtype))
        return statistics.normalize(upsampler(x)).float()


def validate(args: dict, world_size: int, max_video_tokens: int) -> tuple[tiled.TileGrid, tuple[int, ...]]:
    """Everything a user can get wrong, alike on every rank, before any collective (ValueError)."""
    video, audio, sigmas = args["video"], args.get("audio"), args["sigmas"]
    latents.check_video_latent(video, "stage-1 video latent")
    if audio is not None:
        latents.check_audio_latent(audio, "stage-1 audio latent")
        if audio.shape[0] != video.shape[0]:
            raise ValueError(
                "the audio and video latents have different batch sizes; build them with the same batch"
            )
    for name, t in (("video", video), ("audio", audio)):
        if t is not None and not torch.isfinite(t).all():
            raise ValueError(f"the stage-1 {name} latent holds NaN or infinite values; re-create it upstream")
    sampling.validate_sigmas(sigmas)
    if float(sigmas[0]) >= PURE_NOISE_SIGMA:
        raise ValueError(
            f"the first sigma is {float(sigmas[0]):g}: TDP denoises each tile on its own, and from pure noise "
            "(sigma 1.0) the tiles invent unrelated content that never joins into one video. TDP is an "
            "upscaler: start it from the partly re-noised stage-1 result (default sigmas 0.625, 0.4, 0.0) and "
            "generate stage 1 with the SP Sampler."
        )
    if args["sampler"] not in sampling.SAMPLERS:
        raise ValueError(
            f"sampler {args['sampler']!r} is not supported; choose one of {', '.join(sampling.SAMPLERS)}"
        )
    up_shape = tiled.upscaled_latent_shape(tuple(video.shape), read_checkpoint_config(args["upscaler"]))
    overlap = int(args["overlap"])
    extent = (up_shape[3], up_shape[4])
    counts = tiled.resolve_counts(int(args["tiles_h"]), int(args["tiles_w"]), world_size, extent, overlap)
    grid = tiled.make_grid(extent, counts, overlap)
    tokens = up_shape[2] * grid.largest_tile_cells
    if tokens > max_video_tokens:
        raise ValueError(
            f"the largest tile has {tokens:,} video tokens ({up_shape[2]} frames x {tokens // up_shape[2]} cells), "
            f"over the limit of {max_video_tokens:,}. Use more tiles (now {counts[0]} x {counts[1]}), fewer frames, "
            "or a lower stage-1 resolution."
        )
    return grid, up_shape


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
        )
    return out[0]


def _timing(model: LoadedModel) -> latents.AudioTiming:
    d = model.description
    return latents.AudioTiming(sample_rate=d.audio_sample_rate_hz, hop_length=d.audio_hop_length)


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
) -> torch.Tensor:
    """The TDP stage: `video` (upscaled) re-noised and denoised over `grid`; final video [B,C,F,H,W]
    float32 on `device`. Collective when world_size > 1; the result is identical on every rank.
    args: cfg, frame_rate, seed, sampler, sigmas."""
    cfg = float(args["cfg"])
    denoiser = TiledDenoiser(
        model, positive, negative, Guidance(cfg, cfg), grid, tuple(video.shape),
        None if audio is None else tuple(audio.shape), float(args["frame_rate"]), _timing(model), device,
        rank=rank, world_size=world_size, reduce=all_reduce_sum(world_size),
    )  # fmt: skip
    return _run_stage(denoiser, video, audio, args, device, on_step)


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
        None if audio is None else audio.shape, float(args["frame_rate"]), device, _timing(model),
    )  # fmt: skip
    return _run_stage(denoiser, video, audio, args, device, None)


@op("tdp_upscale")
def tdp_upscale(job, args: dict) -> dict:
    """args: video [B,128,F,H,W], audio [B,8,T,16] or None, positive / negative (ops_sampling form),
    frame_rate, sigmas, sampler, cfg, seed, tiles_h / tiles_w (0 and 0 = auto), overlap, upscaler (a
    path), max_video_tokens, out_video: output slot [B,128,F,2H,2W] float32 written by rank 0."""
    rt = job.runtime
    model = loaded_model(job)
    try:
        grid, up_shape = validate(
            args, job.world_size, int(args.get("max_video_tokens", DEFAULT_MAX_VIDEO_TOKENS))
        )
        if tuple(args["out_video"].shape) != up_shape:
            raise ValueError(f"output slot {tuple(args['out_video'].shape)} != upscaled shape {up_shape}")
        positive = text_context(model, args["positive"], rt.device, "positive")
        negative = text_context(model, args.get("negative"), rt.device, "negative")
        if float(args["cfg"]) != 1.0 and negative is None:
            raise ValueError("cfg is not 1 but no negative conditioning was given; connect a negative prompt")
        statistics = video_statistics(model, rt.device)
        upsampler = spatial_upsampler(model, str(args["upscaler"]), rt.device)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    video = upsample_video(args["video"], upsampler, statistics, model.dtype)
    if job.world_size > 1:
        with torch.inference_mode():
            dist.broadcast(video, src=0)  # one source of truth: every rank steps the same latent

    def on_step(step: int, total: int, x: list[torch.Tensor]) -> None:
        job.progress(step, total)
        job.check_cancel()

    job.check_cancel()
    result = denoise_upscaled(
        model, video, args.get("audio"), positive, negative, grid, args,
        rank=job.rank, world_size=job.world_size, device=rt.device, on_step=on_step,
    )  # fmt: skip
    if job.rank == 0:
        args["out_video"].copy_(result.to(args["out_video"].dtype))
    mine = grid.for_rank(job.rank, job.world_size)
    return {
        "tiles": list(grid.counts),
        "tiles_on_rank": len(mine),
        "largest_tile_tokens": up_shape[2] * grid.largest_tile_cells,
        "steps": len(args["sigmas"]) - 1,
    }
