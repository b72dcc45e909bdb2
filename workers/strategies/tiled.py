"""Tile geometry for tiled data parallelism (TDP): pure functions, no process group, no model.

NOTE [tdp tiles]: the upscaled video latent [B, C, F, H, W] is cut into a grid of `tiles_h x tiles_w`
boxes over the spatial axes, and for a long clip into `tiles_t` spans of frames as well (NOTE [time
tiles]; one span, every tile holding all frames, unless asked or the clip is long). Along an axis of
`extent` cells, `count` tiles with `overlap` shared cells between neighbours have
`size = (extent + overlap * (count - 1)) // count` cells, the first `remainder` tiles one more, so the
tiles cover the axis exactly and every pair of neighbours shares exactly `overlap` cells. Tiles are
numbered row-major (time, then height, then width) and dealt round-robin to ranks, so there may be
more tiles than ranks (tile i runs on rank i mod N) or fewer (idle ranks contribute zeros to the sum).

NOTE [time tiles]: a clip longer than the model generates in one go (AUTO_TILE_FRAMES latent frames,
20 seconds at 25 fps) is also cut along time, with the same overlap in latent frames. Each tile is
handed to the model as a video of its own, so its positions start at zero in time as they do in
space; the stage-1 audio the tile hears is cut to the tile's frames by ComfyUI's own mapping for
context windows (LTXAV.map_context_window_to_modalities: video frame v <-> audio frames
[round(v A / F), round((v + 1) A / F))), so video and audio start together and stay aligned.

NOTE [blend weights]: each tile weights its output with a separable trapezoid: 1 inside, ramps of
k / (overlap + 1) into the shared cells. Lightricks' ramps (ltx_core.tiling) sum to one only up to
rounding, and not at all where one tile's two ramps meet (tiles shorter than twice the overlap).
Here, per axis, the integer trapezoid heights of the tiles covering a cell are normalised by their
sum and quantised to multiples of 2**-bits, the last tile taking the remainder, so the 1-D
weights of every cell sum to exactly 1; a tile's weight is the product of its axes' numbers, a
multiple of 2**-24 (12 bits per axis in space, 8 per axis when time is tiled too), which float32
holds exactly, as it does every partial sum of them. So the blended sum of
all tiles is a partition of unity bit for bit, whatever the counts, sizes and overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..wire.constants import VIDEO_PIXELS_PER_CELL

# 1-D weights are multiples of 2**-12: two tiled axes -> products on a 2**-24 grid, exact in float32
# (24-bit significand). The ramp shape moves by at most 2**-13, far below anything visible.
WEIGHT_BITS = 12
WEIGHT_ONE = 1 << WEIGHT_BITS
# Time tiled as well: three axes of 8 bits keep the products on the same 2**-24 grid.
WEIGHT_BITS_3D = 8
# tiles_h = tiles_w = AUTO: a grid chosen from the latent's size alone (auto_counts), never from the
# number of ranks, so a shared workflow gives the same video on 1, 2 or 8 GPUs (issue 20: a grid of one
# tile per rank changed the result by 1.5e-2 between 1 and 2 workers).
AUTO = 0
# Auto tiles are at most this many cells along an axis before the overlap is added: 24 cells = 768 px,
# the long side of the stage-1 size of LTX-2's two-stage template (768x512), which the model generates
# whole. So the template's 1536x1024 stage 2 gets 2x2 tiles (the grid bench/bench_tdp.py measures),
# spread evenly over 1, 2 or 4 GPUs.
AUTO_TILE_CELLS = 24
# Auto tiles along time hold at most this many latent frames before the overlap is added: 64 latent
# frames = 505 pixel frames, 20 seconds at 25 fps, the longest clip LTX-2 generates in one go; shorter
# clips (and a 10 s clip through the temporal x2 upscaler: 2 x 31 - 1 = 61 frames) are not cut.
AUTO_TILE_FRAMES = 64
# LTX-2's VAE: one latent cell is 32 x 32 pixels (for messages only).
PIXELS_PER_CELL = VIDEO_PIXELS_PER_CELL


@dataclass(frozen=True)
class AxisSpan:
    """One tile along one axis: cells [start, end) of the full extent."""

    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def slice(self) -> slice:
        return slice(self.start, self.end)


@dataclass(frozen=True)
class Tile:
    """One box of the grid. index: row-major number (rank = index mod world size).
    weight_h [h.size] / weight_w [w.size] (/ weight_t [t.size]): int64 numerators of the 1-D blend
    weights, each over `one`. t: the tile's frames, None when time is not tiled (all frames)."""

    index: int
    h: AxisSpan
    w: AxisSpan
    weight_h: torch.Tensor
    weight_w: torch.Tensor
    t: AxisSpan | None = None
    weight_t: torch.Tensor | None = None
    one: int = WEIGHT_ONE

    def shape(self, full_shape: tuple[int, ...]) -> tuple[int, int, int, int, int]:
        """[B, C, F, h, w] of this tile cut from a latent of `full_shape` [B, C, F, H, W]."""
        b, c, f = full_shape[:3]
        return (b, c, self.frames(f), self.h.size, self.w.size)

    def frames(self, total: int) -> int:
        """Latent frames the tile holds of a video of `total`."""
        return total if self.t is None else self.t.size

    def blend_mask(
        self, dtype: torch.dtype = torch.float32, device: torch.device | None = None
    ) -> torch.Tensor:
        """[h, w] weights, or [t, h, w] when time is tiled (exact products on the 2**-24 grid), to
        broadcast over [B, C, F, h, w]."""
        numerators = self.weight_h[:, None] * self.weight_w[None, :]  # < 2**24: exact in int64 and float32
        scale = self.one * self.one
        if self.weight_t is not None:
            numerators = self.weight_t[:, None, None] * numerators[None]
            scale *= self.one
        mask = numerators.to(torch.float32) * (1.0 / scale)
        return mask.to(device=device, dtype=dtype)

    def cut(self, latent: torch.Tensor) -> torch.Tensor:
        """This tile of a [B, C, F, H, W] tensor (a view)."""
        frames = slice(None) if self.t is None else self.t.slice
        return latent[:, :, frames, self.h.slice, self.w.slice]

    def interior(self) -> torch.Tensor:
        """[h, w] bool ([t, h, w] when time is tiled): the cells no neighbour shares (blend weight
        exactly 1), where the blended result is this tile's own output bit for bit."""
        inside = (self.weight_h == self.one)[:, None] & (self.weight_w == self.one)[None, :]
        if self.weight_t is not None:
            inside = (self.weight_t == self.one)[:, None, None] & inside[None]
        return inside


@dataclass(frozen=True)
class TileGrid:
    """The tiles of one latent. extent: (H, W) in latent cells; counts: (tiles_h, tiles_w);
    time_tiles: spans along time (1: every tile holds all frames), over `frames` latent frames."""

    extent: tuple[int, int]
    counts: tuple[int, int]
    overlap: int
    tiles: tuple[Tile, ...]
    time_tiles: int = 1
    frames: int | None = None

    def for_rank(self, rank: int, world_size: int) -> tuple[Tile, ...]:
        """Round-robin: tile i belongs to rank i mod world_size."""
        return tuple(t for t in self.tiles if t.index % world_size == rank)

    def largest_tile_tokens(self, total_frames: int) -> int:
        """Video tokens of the largest tile of a video of `total_frames` latent frames."""
        return max(t.frames(total_frames) * t.h.size * t.w.size for t in self.tiles)

    def describe(self) -> str:
        """'2x2 tiles', or with time tiled '2x2 tiles x 3 spans of frames'."""
        rows, cols = self.counts
        spans = "" if self.time_tiles == 1 else f" x {self.time_tiles} spans of frames"
        return f"{rows}x{cols} tiles{spans}"

    def centre_tile(self) -> Tile:
        """The tile whose centre lies nearest the centre of the frame; on a tie (every even grid:
        the four tiles of 2x2 all touch the centre) the first in reading order, so top-left (and with
        time tiled, of the first span)."""
        middle = (self.extent[0] / 2, self.extent[1] / 2)

        def distance(tile: Tile) -> float:
            return ((tile.h.start + tile.h.end) / 2 - middle[0]) ** 2 + (
                (tile.w.start + tile.w.end) / 2 - middle[1]
            ) ** 2

        return min(self.tiles, key=lambda t: (distance(t), t.index))


def max_tiles(extent: int, overlap: int) -> int:
    """Most tiles an axis of `extent` cells holds when each must exceed `overlap` cells."""
    return max(1, extent - overlap)


def _tiles(count: int) -> str:
    return f"{count} tile{'' if count == 1 else 's'}"


def split_axis(extent: int, count: int, overlap: int, axis: str) -> tuple[AxisSpan, ...]:
    """`count` spans covering [0, extent), neighbours sharing `overlap` cells (NOTE [tdp tiles]).

    Raises ValueError naming the axis, the extent in latent cells and the overlap when every tile
    cannot be longer than the overlap (a tile no longer than the overlap would not advance).
    """
    if count < 1:
        raise ValueError(f"tiles along {axis} must be at least 1, got {count}")
    if overlap < 0:
        raise ValueError(f"overlap must be 0 or more latent cells, got {overlap}")
    if count == 1:
        return (AxisSpan(0, extent),)
    if count > max_tiles(extent, overlap):
        unit = "latent frames" if axis == "time" else f"cells ({extent * PIXELS_PER_CELL} px)"
        cells = "frames" if axis == "time" else "cells"
        raise ValueError(
            f"{count} tiles along {axis} do not fit: the upscaled latent is {extent} {unit} "
            f"along {axis}, and with an overlap of {overlap} {cells} every tile needs at least {overlap + 1} "
            f"{cells}, which allows at most {_tiles(max_tiles(extent, overlap))}. Use fewer tiles along {axis} "
            "or a smaller overlap."
        )
    total = extent + overlap * (count - 1)
    size, remainder = divmod(total, count)
    spans = []
    for i in range(count):
        start = i * (size - overlap) + min(i, remainder)
        spans.append(AxisSpan(start, start + size + (1 if i < remainder else 0)))
    return tuple(spans)


def axis_weights(
    spans: tuple[AxisSpan, ...], extent: int, overlap: int, bits: int = WEIGHT_BITS
) -> list[torch.Tensor]:
    """Per span, int64 weight numerators over its cells; at every cell of the axis the numerators
    of the spans covering it sum to exactly 2**bits (NOTE [blend weights])."""
    one = 1 << bits
    heights = []
    for i, span in enumerate(spans):
        j = torch.arange(span.size, dtype=torch.int64)
        flat = torch.full_like(j, overlap + 1)
        left = j + 1 if i > 0 else flat  # a ramp only where a neighbour shares the cells
        right = span.size - j if i < len(spans) - 1 else flat
        heights.append(torch.minimum(torch.minimum(left, right), flat))
    total = torch.zeros(extent, dtype=torch.int64)
    for span, height in zip(spans, heights):
        total[span.slice] += height
    weights = []
    assigned = torch.zeros(extent, dtype=torch.int64)
    for i, (span, height) in enumerate(zip(spans, heights)):
        share = (height * one + total[span.slice] // 2) // total[span.slice]  # rounded
        if i + 1 < len(spans):
            # A later span still covers a cell iff the cell lies at or after that span's start.
            covered_later = torch.arange(span.start, span.end) >= spans[i + 1].start
        else:
            covered_later = torch.zeros(span.size, dtype=torch.bool)
        share = torch.where(covered_later, share, one - assigned[span.slice])
        assigned[span.slice] += share
        weights.append(share)
    return weights


def auto_counts(extent: tuple[int, int], overlap: int) -> tuple[int, int]:
    """(tiles_h, tiles_w) for AUTO: per axis ceil(extent / AUTO_TILE_CELLS) tiles, lowered to what fits
    (NOTE [tdp tiles]). Depends on the latent only: 1536x1024 (48 x 32 cells) -> 2x2, 1920x1088 -> 2x3,
    768x512 -> 1x1."""
    return tuple(  # type: ignore[return-value]
        min(-(-cells // AUTO_TILE_CELLS), max_tiles(cells, overlap)) for cells in extent
    )


def resolve_counts(tiles_h: int, tiles_w: int, extent: tuple[int, int], overlap: int) -> tuple[int, int]:
    """Counts as asked, or for AUTO (both 0) the latent's auto grid (`auto_counts`). Tiles are dealt
    round-robin to the ranks (more tiles than ranks run in turns; fewer leave ranks idle)."""
    if tiles_h == AUTO and tiles_w == AUTO:
        return auto_counts(extent, overlap)
    if tiles_h < 1 or tiles_w < 1:
        raise ValueError(
            f"tiles must be 'auto' or at least 1 per axis, got {tiles_h} x {tiles_w} (height x width)"
        )
    return tiles_h, tiles_w


def resolve_time_tiles(tiles_t: int, frames: int, overlap: int) -> int:
    """Spans along time as asked, or for AUTO ceil(frames / AUTO_TILE_FRAMES), lowered to what fits
    (NOTE [time tiles]); from the latent alone, like the spatial grid."""
    if tiles_t == AUTO:
        return min(-(-frames // AUTO_TILE_FRAMES), max_tiles(frames, overlap))
    if tiles_t < 1:
        raise ValueError(f"time tiles must be 0 (auto) or at least 1, got {tiles_t}")
    return tiles_t


def make_grid(
    extent: tuple[int, int],
    counts: tuple[int, int],
    overlap: int,
    frames: int | None = None,
    time_tiles: int = 1,
) -> TileGrid:
    """The grid of `counts` (tiles_h, tiles_w) tiles over `extent` (H, W) latent cells, each cut into
    `time_tiles` spans of the `frames` latent frames (NOTE [time tiles]). Raises ValueError (split_axis)
    when a count does not fit its axis."""
    if time_tiles > 1 and frames is None:
        raise ValueError("time tiles need the video's frame count")
    bits = WEIGHT_BITS if time_tiles == 1 else WEIGHT_BITS_3D
    spans_h = split_axis(extent[0], counts[0], overlap, "height")
    spans_w = split_axis(extent[1], counts[1], overlap, "width")
    weights_h = axis_weights(spans_h, extent[0], overlap, bits)
    weights_w = axis_weights(spans_w, extent[1], overlap, bits)
    if time_tiles == 1:
        spans_t, weights_t = (None,), (None,)
    else:
        spans_t = split_axis(frames, time_tiles, overlap, "time")
        weights_t = axis_weights(spans_t, frames, overlap, bits)
    per_span = len(spans_h) * len(spans_w)
    tiles = tuple(
        Tile(
            k * per_span + i * len(spans_w) + j,
            sh,
            sw,
            weights_h[i],
            weights_w[j],
            st,
            weights_t[k],
            1 << bits,
        )
        for k, st in enumerate(spans_t)
        for i, sh in enumerate(spans_h)
        for j, sw in enumerate(spans_w)
    )
    return TileGrid(
        extent=extent, counts=counts, overlap=overlap, tiles=tiles, time_tiles=time_tiles, frames=frames
    )


def audio_span(frames: AxisSpan, video_frames: int, audio_frames: int) -> AxisSpan:
    """The audio latent frames that go with video latent frames `frames` of `video_frames`: ComfyUI's
    mapping for context windows (LTXAV.map_context_window_to_modalities), frame v <-> audio
    [round(v A / F), round((v + 1) A / F)), at least one audio frame, over a contiguous span."""
    start = min(round(frames.start * audio_frames / video_frames), audio_frames - 1)
    end = min(round(frames.end * audio_frames / video_frames), audio_frames)
    return AxisSpan(start, max(end, start + 1))


def audio_shares(grid: TileGrid, audio_frames: int) -> list[tuple[AxisSpan, torch.Tensor]] | None:
    """Per tile of `grid` (in order), its audio span and the float32 share each of those audio
    frames gets of the tile's audio prediction: 1 / (tiles hearing that frame), so the shares of
    every audio frame sum to one over the grid. None when time is not tiled (every tile hears all)."""
    if grid.time_tiles == 1:
        return None
    spans = [audio_span(t.t, grid.frames, audio_frames) for t in grid.tiles]
    hearing = torch.zeros(audio_frames, dtype=torch.float32)
    for span in spans:
        hearing[span.slice] += 1
    return [(span, 1.0 / hearing[span.slice]) for span in spans]


def tile_positions(positions: torch.Tensor, full_shape: tuple[int, ...], tile: Tile) -> torch.Tensor:
    """The tile's generated-token positions [B, 3, F*h*w, 2] cut from the full latent's positions
    [B, 3, F*H*W, 2] (token order (frame, row, column), as latents.video_to_tokens)."""
    b, _, f, h, w = full_shape
    grid = positions.view(b, positions.shape[1], f, h, w, 2)[:, :, :, tile.h.slice, tile.w.slice]
    return grid.reshape(b, positions.shape[1], -1, 2)


def shift_to_origin(positions: torch.Tensor, num_generated: int) -> torch.Tensor:
    """Positions [B, A, N, 2] moved so the first `num_generated` tokens start at zero on every axis.

    One offset per (batch item, axis): the smallest start among the generated tokens. Every token
    (appended conditioning and reference tokens too) moves by it, so interval widths and the gaps
    between tokens are kept; only the origin moves, into the range the model was trained on.
    """
    offset = positions[:, :, :num_generated, 0].amin(dim=2)  # [B, A]
    return positions - offset[:, :, None, None]


def tile_bounds(positions: torch.Tensor, full_shape: tuple[int, ...], grid: TileGrid) -> torch.Tensor:
    """[num_tiles, B, 3, 2]: per tile the smallest start and largest end of its generated tokens."""
    bounds = []
    for tile in grid.tiles:
        p = tile_positions(positions, full_shape, tile)
        bounds.append(torch.stack((p[..., 0].amin(dim=2), p[..., 1].amax(dim=2)), dim=-1))
    return torch.stack(bounds)


def extra_token_weights(bounds: torch.Tensor, extra_positions: torch.Tensor) -> torch.Tensor:
    """Which tiles keep each appended (conditioning) token, and with what blend weight.

    bounds: [num_tiles, B, 3, 2] from `tile_bounds`; extra_positions: [B, 3, M, 2] of the tokens
    appended after the generated ones. A tile keeps a token whose [start, end) overlaps the tile on
    every axis for some batch item; reference tokens (negative start time) are kept by every tile,
    and so is a token that overlaps no tile (rather than being dropped, as a tile-only rule would).
    Returns [num_tiles, M] float32: 1 / (number of tiles keeping the token) where kept, else 0; the
    columns sum to one, so the tiles' weighted outputs add up to one copy of each token.
    """
    starts, ends = extra_positions[..., 0], extra_positions[..., 1]  # [B, 3, M]
    overlaps = (starts[None] < bounds[..., 1:2]) & (ends[None] > bounds[..., 0:1])  # [tiles, B, 3, M]
    keep = overlaps.all(dim=2).any(dim=1)  # [tiles, M]
    shared = (starts[:, 0] < 0).any(dim=0) | ~keep.any(dim=0)  # [M]: reference or orphan tokens
    keep = keep | shared[None]
    return keep.to(torch.float32) / keep.sum(dim=0, keepdim=True).to(torch.float32)


def upscaled_latent_shape(shape: tuple[int, ...], upsampler_config: dict[str, Any]) -> tuple[int, ...]:
    """[B, C, F', H', W'] after a latent upsampler with this metadata config; ValueError otherwise.

    x2 (LTX-2's, LTX-2.3's 1.1): 2H x 2W. A rational resampler (LTX-2.3's x1.5) scales up by num with a
    pixel shuffle, then blurs and strides by den (5-tap kernel, padding 2): ceil(num x H / den). A
    temporal one (a 3-D model) doubles the frames and drops the first: 2F - 1, with or without x2 in space.
    """
    spatial = bool(upsampler_config.get("spatial_upsample", True))
    temporal = bool(upsampler_config.get("temporal_upsample", False))
    scale = float(upsampler_config.get("spatial_scale", 2.0))
    rational = bool(upsampler_config.get("rational_resampler", False))
    fraction = RATIONAL_SCALES.get(scale) if rational else {2.0: (2, 1)}.get(scale)
    three_d = int(upsampler_config.get("dims", 2)) == 3
    if temporal:  # ComfyUI's temporal upsamplers: x2 in space or none, never rational, 3-D convolutions
        fraction = (2, 1) if spatial else (1, 1)
    if (not spatial and not temporal) or fraction is None or (temporal and (rational or not three_d)):
        raise ValueError(
            f"the upscale model is not a latent upsampler the TDP Upscaler takes (spatial_upsample="
            f"{spatial}, temporal_upsample={temporal}, spatial_scale={scale:g}, rational_resampler={rational}); "
            "it takes the spatial x2 upscalers (ltx-2-spatial-upscaler-x2, ltx-2.3-spatial-upscaler-x2-1.1), "
            "LTX-2.3's x1.5 and the temporal x2 ones. Pick one of those, or run other upsamplers with "
            "LTXVLatentUpsampler."
        )
    num, den = fraction
    b, c, f, h, w = shape
    frames = 2 * f - 1 if temporal else f
    return (b, c, frames, -(-num * h // den), -(-num * w // den))


# ComfyUI's rational spatial scales (comfy/ldm/lightricks/latent_upsampler.py): scale -> (up, down).
RATIONAL_SCALES = {0.75: (3, 4), 1.5: (3, 2), 2.0: (2, 1), 4.0: (4, 1)}
