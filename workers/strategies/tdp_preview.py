"""Preview of the TDP stage: a part of the upscaled video, computed the way the full run computes it.

NOTE [tdp preview]: a preview denoises only a region of the upscaled latent: the centre tile of the
grid (NOTE [tdp tiles]), the first latent frames, or both, and returns a LATENT of just that region,
so a decode shows a small clip at full detail. What stays the full run's:
  - the noise: the sampler keeps the whole latent as its state, so the initial noise and every
    ancestral draw are the full run's, cell for cell (they are drawn for the full shape); only the
    model call is cut to the region, and cells outside it are left as they are (never output);
  - the positions: the centre tile keeps the positions it has in the full run, shifted to start at
    zero as every tile is; the first frames keep their own (a video's positions do not depend on
    its length);
  - the context: text, and the whole stage-1 audio (held clean, as in the full run).
What cannot stay the same: in the full run, cells a tile shares with a neighbour are blended with
the neighbour's output after every step, and that blend feeds the tile's next step; a preview has no
neighbours. So the first step's output agrees in the tile's interior (cells no neighbour shares:
bit for bit on one rank, to float rounding when the group splits the tile) and later steps drift by
what the neighbours added. Likewise the first frames do not see the later frames that the full run
attends to. tests/test_tdp.py measures both.
Speed: a centre tile runs over the whole group with sequence parallelism (the tile split over the
ranks, as the SP Sampler splits a video), so on N GPUs it costs about 1/N of one tile; the full run
costs one tile per GPU at best. First frames run the usual tiled stage on fewer frames.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..wire.constants import VIDEO_FRAMES_PER_CELL
from ..wire.requests import (
    PREVIEW_BOTH,
    PREVIEW_CENTRE_TILE,
    PREVIEW_FIRST_FRAMES,
    PREVIEW_OFF,
    check_preview_mode,
)
from .tiled import Tile, TileGrid

# The sampler's model call (engine/ltxcore/sampling.py Denoiser): latents, sigma, masks -> denoised.
Denoiser = Callable[[list[torch.Tensor], float, list[torch.Tensor | None]], list[torch.Tensor]]

OFF, CENTRE_TILE, FIRST_FRAMES, BOTH = PREVIEW_OFF, PREVIEW_CENTRE_TILE, PREVIEW_FIRST_FRAMES, PREVIEW_BOTH
FRAMES_PER_LATENT_FRAME = VIDEO_FRAMES_PER_CELL


@dataclass(frozen=True)
class PreviewRegion:
    """What a preview computes of an upscaled latent [B, C, F, H, W]: latent frames [0, frames) and
    the cells of `tile` (the whole frame when None)."""

    full_shape: tuple[int, int, int, int, int]
    frames: int
    tile: Tile | None

    @property
    def frames_shape(self) -> tuple[int, int, int, int, int]:
        """[B, C, frames, H, W]: the full frame over the preview's frames."""
        b, c, _, h, w = self.full_shape
        return (b, c, self.frames, h, w)

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        """[B, C, frames, h, w] of the LATENT the preview returns."""
        if self.tile is None:
            return self.frames_shape
        return self.tile.shape(self.frames_shape)

    @property
    def pixel_frames(self) -> int:
        return (self.frames - 1) * FRAMES_PER_LATENT_FRAME + 1

    def cut(self, latent: torch.Tensor) -> torch.Tensor:
        """The region of a [B, C, F, H, W] tensor (a view)."""
        x = latent[:, :, : self.frames]
        return x if self.tile is None else self.tile.cut(x)


check_mode = check_preview_mode


def preview_region(
    mode: str, pixel_frames: int, grid: TileGrid, full_shape: tuple[int, ...]
) -> PreviewRegion | None:
    """The region of a preview `mode` (None for "off"). `pixel_frames` counts as EmptyLTXVLatentVideo's
    length: (n - 1) // 8 + 1 latent frames, at most the video's. Raises ValueError for an unknown
    mode or fewer than 1 frame."""
    check_mode(mode)
    if mode == OFF:
        return None
    if pixel_frames < 1:
        raise ValueError(
            f"preview_frames must be at least 1 (a frame count 8k + 1, e.g. 25), got {pixel_frames}"
        )
    total = full_shape[2]
    frames = total if mode == CENTRE_TILE else min(total, (pixel_frames - 1) // FRAMES_PER_LATENT_FRAME + 1)
    tile = grid.centre_tile() if mode in (CENTRE_TILE, BOTH) else None
    return PreviewRegion(full_shape=tuple(full_shape), frames=frames, tile=tile)


def audio_frames(
    region: PreviewRegion, audio_frames_total: int, frame_rate: float, latents_per_second: float
) -> int:
    """Audio latent frames that last as long as the preview's video (ComfyUI's rule,
    num_of_latents_from_frames: round(frames / fps * latents per second)); all of them when the preview
    keeps every frame."""
    if region.frames == region.full_shape[2]:
        return audio_frames_total
    return max(1, min(audio_frames_total, round(region.pixel_frames / frame_rate * latents_per_second)))


class RegionDenoiser:
    """The sampler's model call for a preview (sampling.Denoiser): the sampler steps the full-size
    state; `inner`, built for the region's shape, denoises the region; every other cell is returned
    as it came in (its denoised value is never output). Collective when `inner` is."""

    def __init__(self, inner: Denoiser, region: PreviewRegion) -> None:
        self.inner = inner
        self.region = region

    def __call__(
        self, xs: list[torch.Tensor], sigma: float, masks: list[torch.Tensor | None]
    ) -> list[torch.Tensor]:
        video, mask = xs[0], masks[0]
        region_mask = (
            None
            if mask is None
            else self.region.cut(mask.expand(video.shape[0], mask.shape[1], *video.shape[2:]))
        )
        out = self.inner([self.region.cut(video), *xs[1:]], sigma, [region_mask, *masks[1:]])
        full = video.clone()
        self.region.cut(full).copy_(out[0])
        return [full, *out[1:]]
