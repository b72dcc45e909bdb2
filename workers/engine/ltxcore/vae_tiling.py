"""ltx-core's tiling rule for the distributed VAE decode's plan (NOTE [vae tiles] in
strategies/vae_tiles.py): each axis cut with ltx-core 1.0.0's own split and mapping functions.
"""

from __future__ import annotations

import torch
from ltx_core.model.video_vae.video_vae import (
    map_spatial_interval_to_pixel,
    map_temporal_interval_to_frame,
    split_temporal_latents,
    split_with_symmetric_overlaps,
)

from ...strategies.vae_tiles import FRAMES_PER_CELL, PIXELS_PER_CELL, AxisSplit, TilePlan, make_plan
from ...wire.requests import TileSettings


def ltxcore_spans(
    length: int, split: AxisSplit, temporal: bool
) -> list[tuple[tuple[int, int], tuple[int, int], torch.Tensor]]:
    """(latent span, pixel span, ltx-core mask) per tile along one axis (vae_tiles.SpanRule):
    spatial tiles with symmetric overlaps; temporal chunks split causally."""
    splitter = split_temporal_latents if temporal else split_with_symmetric_overlaps
    mapper = map_temporal_interval_to_frame if temporal else map_spatial_interval_to_pixel
    scale = FRAMES_PER_CELL if temporal else PIXELS_PER_CELL
    iv = splitter(split.size, split.overlap)(length)
    out = []
    for start, end, left, right in zip(iv.starts, iv.ends, iv.left_ramps, iv.right_ramps):
        span, mask = mapper(start, end, left, right, scale)
        out.append(((start, end), (span.start, span.stop), mask))
    return out


def ltxcore_plan(latent_fhw: tuple[int, int, int], settings: TileSettings, world_size: int) -> TilePlan:
    """ltx-core's tile plan for a latent of (F, H, W) cells on `world_size` ranks."""
    return make_plan(latent_fhw, settings, world_size, ltxcore_spans)
