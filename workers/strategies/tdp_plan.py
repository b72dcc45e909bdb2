"""The TDP Upscaler's plan, for either engine: the tile grid over the upscaled latent, the preview's
region (NOTE [tdp preview] in tdp_preview.py), and the reply every rank gives (NOTE [tdp tiles] in
tiled.py). Pure: reads the upsampler file's config, imports no engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...kernels import even_split
from ..wire.model_files import read_checkpoint_config
from ..wire.requests import PREVIEW_BOTH, PREVIEW_OFF, TdpUpscale
from . import tiled
from .tdp_preview import PreviewRegion, preview_region


@dataclass(frozen=True)
class TdpPlan:
    """grid: the tiles over the upscaled latent of `up_shape` [B, C, F, 2H, 2W]; region: the preview's
    (None: the full run); out_shape: the video the job returns (the region's for a preview)."""

    grid: tiled.TileGrid
    up_shape: tuple[int, ...]
    region: PreviewRegion | None

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.up_shape if self.region is None else self.region.shape

    @property
    def centre_tile_only(self) -> bool:
        """A preview of one tile: the whole group runs it sequence-parallel (NOTE [tdp preview])."""
        return self.region is not None and self.region.tile is not None


def plan_tdp(request: TdpUpscale) -> TdpPlan:
    """What depends on the upsampler file (ValueError saying what to change), alike on every rank,
    before any collective; the request checked the rest."""
    video, max_video_tokens = request.video, request.max_video_tokens
    up_shape = tiled.upscaled_latent_shape(tuple(video.shape), read_checkpoint_config(request.upscaler))
    overlap = request.overlap
    extent = (up_shape[3], up_shape[4])
    counts = tiled.resolve_counts(request.tiles_h, request.tiles_w, extent, overlap)
    # A preview computes a part of the first frames or the centre tile of the frame: its grid is the
    # spatial one (time spans would only cut the region it shows).
    time_tiles = (
        1
        if request.preview != PREVIEW_OFF
        else tiled.resolve_time_tiles(request.tiles_t, up_shape[2], overlap)
    )
    grid = tiled.make_grid(extent, counts, overlap, up_shape[2], time_tiles)
    region = preview_region(request.preview, request.preview_frames, grid, up_shape)
    frames = up_shape[2] if region is None else region.frames
    tokens = (
        grid.largest_tile_tokens(frames)
        if region is None or region.tile is None
        else frames * region.tile.h.size * region.tile.w.size
    )
    if tokens > max_video_tokens:
        if region is not None and region.tile is not None:  # a preview runs one span: it cannot cut time
            largest = region.tile
            fix = (
                f"Use preview '{PREVIEW_BOTH}' (its preview_frames only), more tiles (now {grid.describe()}), "
                "or a lower stage-1 resolution."
            )
        else:
            largest = max(grid.tiles, key=lambda t: t.frames(frames) * t.h.size * t.w.size)
            fix = (
                f"Use more tiles (now {grid.describe()}), more time_tiles for a long clip, fewer frames, or a "
                "lower stage-1 resolution."
            )
        raise ValueError(
            f"the largest tile has {tokens:,} video tokens ({largest.frames(frames)} frames x "
            f"{largest.h.size * largest.w.size} cells), over the limit of {max_video_tokens:,}. {fix}"
        )
    plan = TdpPlan(grid, up_shape, region)
    if request.out_video is not None and tuple(request.out_video.shape) != plan.out_shape:
        raise ValueError(f"output slot {tuple(request.out_video.shape)} != result shape {plan.out_shape}")
    return plan


def tokens_on_rank(
    grid: tiled.TileGrid, region: PreviewRegion | None, shape: tuple[int, ...], rank: int, world_size: int
) -> int:
    """Video tokens this rank puts through the transformer per model call (per CFG copy): its tiles
    over the frames computed, or for a centre-tile preview its share of the one tile."""
    frames = shape[2] if region is None else region.frames
    if region is not None and region.tile is not None:
        return even_split(frames * region.tile.h.size * region.tile.w.size, world_size)[rank]
    return sum(t.frames(frames) * t.h.size * t.w.size for t in grid.for_rank(rank, world_size))


def tdp_reply(plan: TdpPlan, request: TdpUpscale, rank: int, world_size: int) -> dict:
    """The tdp_upscale reply's plan fields, the same on both engines (the engine adds audio_frames)."""
    grid, region = plan.grid, plan.region
    return {
        "tiles": list(grid.counts),
        "time_tiles": grid.time_tiles,
        "tiles_on_rank": len(grid.for_rank(rank, world_size)),
        "largest_tile_tokens": grid.largest_tile_tokens(plan.up_shape[2]),
        "steps": len(request.sigmas) - 1,
        "video_tokens_on_rank": tokens_on_rank(grid, region, plan.up_shape, rank, world_size),
        "preview_tile": None if region is None or region.tile is None else region.tile.index,
    }
