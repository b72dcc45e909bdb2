"""TDP's model call on the comfy backend: ComfyUI's own cond batch run per tile, blended, summed
over the group.

ComfyUI's sampler runs unchanged on the whole (upscaled) latent on every rank; only the model call is
tiled. The seam is ComfyUI's CALC_COND_BATCH wrapper (comfy/patcher_extension.py WrappersMP), which
sees the packed sampler input x and the processed conds and returns one prediction per cond (cond,
uncond) in x's shape. Per tile the wrapper hands ComfyUI's calc_cond_batch the tile's latent as if
it were the whole video: so the model builds the tile's positions from the tile's own grid, starting
at zero (NOTE [tdp tiles] in strategies/tiled.py), and the per-token timesteps from the tile's part
of the noise mask. Predictions are weighted by the tile's blend mask (NOTE [blend weights], exact
partition of unity) into a full-size buffer; other streams (audio) get the mean over the tiles, or
with time tiled (NOTE [time tiles]) each tile hears and predicts the audio of its own frames, every
audio frame the mean over the tiles that heard it.
One collective sum per model call makes the buffer the full prediction on every rank, so every
rank's sampler steps the same latent.

A grid of one tile with overlap 0 calls calc_cond_batch on the very tensors the untiled sampler
would, weighted by exactly 1.0: the result is native ComfyUI's bit for bit.

Collective: every call all-reduces once (in `reduce`), on every rank, also on ranks without tiles;
nothing inside calc_cond_batch is collective, so ComfyUI's per-process memory-based batching of
cond and uncond cannot make ranks disagree on the number of collectives. Under weights sharded every
forward gathers the blocks' weights over the ranks: the call then ends by evening out the ranks'
forward counts (`lockstep`, NOTE [sharded lockstep]), since the tiles are dealt unevenly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...strategies import tiled
from .sharded_lockstep import Lockstep, section

Reduce = Callable[[torch.Tensor], None]
# Takes a tile's or a region's part of a [B, C, F, H, W] tensor (a view).
Cut = Callable[[torch.Tensor], torch.Tensor]
# Model conds that hold positions in the whole video (guides, keyframes): a tile cannot carry them.
WHOLE_VIDEO_CONDS = ("keyframe_idxs", "guide_attention_entries", "generated_keyframes")
# Conditioning entries that restrict a prompt to a region of the whole latent.
REGIONAL_CONDITIONING = ("area", "mask")


class TiledCondBatch:
    """A WrappersMP.CALC_COND_BATCH wrapper for one sampling run over `latent_shapes` (video first,
    as comfy.utils.pack_latents orders an AV latent), the video cut into `grid` spatially."""

    def __init__(
        self,
        grid: tiled.TileGrid,
        latent_shapes: Sequence[torch.Size],
        *,
        rank: int,
        world_size: int,
        reduce: Reduce,
        lockstep: Lockstep | None = None,
    ) -> None:
        """`lockstep`: the sharded model's sharded_lockstep.Lockstep; None for replicated or offloaded
        weights (no collective inside a forward)."""
        self.grid = grid
        self.lockstep = lockstep
        self.shapes = [torch.Size(s) for s in latent_shapes]
        self.tiles = grid.for_rank(rank, world_size)
        self.reduce = reduce
        # Streams other than the video: every tile predicts them whole; each adds its share of the mean.
        self.stream_share = 1.0 / len(grid.tiles)
        # Time tiled: per tile the audio frames it hears and their shares (None: all, stream_share).
        audio = tiled.audio_shares(grid, self.shapes[1][2]) if len(self.shapes) > 1 else None
        self.audio = None if audio is None else {t.index: audio[t.index] for t in self.tiles}

    def __call__(
        self, executor, model, conds: list, x_in: torch.Tensor, timestep: torch.Tensor, model_options: dict
    ) -> list[torch.Tensor]:
        streams = unpack(x_in, self.shapes)
        buffer, views = _zero_buffer(len(conds), streams)
        with section(self.lockstep):  # sharded: ranks with fewer tiles pad their gathers
            for tile in self.tiles:
                audio = None if self.audio is None else self.audio[tile.index]
                tile_streams = [tile.cut(streams[0]).contiguous(), *streams[1:]]
                if audio is not None:  # the audio of the tile's frames (NOTE [time tiles])
                    tile_streams[1] = _cut_time(tile_streams[1], audio[0]).contiguous()
                tile_x, tile_shapes = pack(tile_streams)
                tile_conds = [
                    None
                    if c is None
                    else [
                        tile_cond(
                            d, tile.cut, self.shapes[0], tile_shapes, None if audio is None else audio[0]
                        )
                        for d in c
                    ]
                    for c in conds
                ]
                outputs = executor(model, tile_conds, tile_x, timestep, model_options)
                weight = tile.blend_mask(torch.float32, x_in.device)
                for i, output in enumerate(outputs):
                    parts = unpack(output, tile_shapes)
                    tile.cut(views[0][i]).add_(parts[0] * weight)
                    for k, (view, part) in enumerate(zip(views[1:], parts[1:])):
                        if k == 0 and audio is not None:
                            span, share = audio
                            share = share.to(part.device, part.dtype).view(1, 1, -1, *([1] * (part.ndim - 3)))
                            _cut_time(view[i], span).add_(part * share)
                        else:
                            view[i].add_(part * self.stream_share)
        self.reduce(buffer)
        return [pack([view[i] for view in views])[0] for i in range(len(conds))]


def pack(streams: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Size]]:
    """The sampler's x from latent streams (video first), as comfy.utils.pack_latents packs an AV
    latent; a video-only latent is sampled as itself."""
    import comfy.utils

    if len(streams) == 1:
        return streams[0], [streams[0].shape]
    return comfy.utils.pack_latents(streams)


def unpack(x: torch.Tensor, shapes: list[torch.Size]) -> list[torch.Tensor]:
    import comfy.utils

    return comfy.utils.unpack_latents(x, shapes)


def _zero_buffer(count: int, streams: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One flat zero buffer (so one collective covers everything) and, per stream, a view
    [count, *stream.shape] into it: one full-size prediction per cond."""
    sizes = [count * s.numel() for s in streams]
    buffer = torch.zeros(sum(sizes), dtype=streams[0].dtype, device=streams[0].device)
    views, start = [], 0
    for stream, size in zip(streams, sizes):
        views.append(buffer[start : start + size].view(count, *stream.shape))
        start += size
    return buffer, views


def _cut_time(stream: torch.Tensor, span: tiled.AxisSpan) -> torch.Tensor:
    """Frames `span` of a latent stream whose time is dim 2 (audio [B, C, T, F]; a view)."""
    return stream[:, :, span.slice]


def tile_cond(
    cond: dict[str, Any],
    cut: Cut,
    video_shape: torch.Size,
    tile_shapes: list[torch.Size],
    audio_span: tiled.AxisSpan | None = None,
) -> dict[str, Any]:
    """One processed cond (comfy.samplers.process_conds form) for a part of a video of `video_shape`
    (a tile, or a preview's region: `cut` takes it from a [B, C, F, H, W] tensor): the video noise mask
    cut to it, the latent shapes its own, the audio mask cut to `audio_span` (a time tile's audio);
    everything else (text, frame rate) shared."""
    import comfy.conds

    model_conds = dict(cond["model_conds"])
    for key in WHOLE_VIDEO_CONDS:
        # check_conditioning refuses these upfront; reaching here is a bug, not a user error.
        assert key not in model_conds, f"{key} cannot be tiled"
    mask = model_conds.get("denoise_mask")
    if mask is not None:
        model_conds["denoise_mask"] = mask._copy_with(cut(mask.cond.expand(video_shape)))
    audio_mask = model_conds.get("audio_denoise_mask")
    if audio_span is not None and audio_mask is not None and audio_mask.cond.shape[2] > 1:
        model_conds["audio_denoise_mask"] = audio_mask._copy_with(_cut_time(audio_mask.cond, audio_span))
    if "latent_shapes" in model_conds:
        model_conds["latent_shapes"] = comfy.conds.CONDConstant(tile_shapes)
    return {**cond, "model_conds": model_conds}


def check_conditioning(conditioning: list | None, what: str) -> None:
    """ValueError when a CONDITIONING carries something that refers to the whole latent and cannot
    follow a tile (guides, keyframes, regional prompts); the message says what to change."""
    for _tensor, options in conditioning or []:
        for key in (*WHOLE_VIDEO_CONDS, *REGIONAL_CONDITIONING):
            if options.get(key) is not None:
                raise ValueError(
                    f"the {what} conditioning carries {key!r}, which refers to the whole video and cannot be "
                    "split into tiles; remove guides with LTXVCropGuides (and regional prompts) before the "
                    "TDP Upscaler"
                )
