"""Tile plan for the distributed VAE decode: pure functions, no process group, no model.

NOTE [vae tiles]: a video latent [B, 128, F, H, W] is cut into a grid of boxes (time x height x
width); each box is decoded whole by ltx-core's VideoDecoder, and tile i (numbered time-major, then
height, then width) is decoded by rank i mod N. Along every axis the latent intervals, their pixel
spans and their blend ramps are exactly those of ltx-core 1.0.0's own tiled decode
(VideoDecoder._prepare_tiles / tiled_decode), built with its own split and mapping functions (the
SpanRule of engine/ltxcore/vae_tiling.py; this module imports no engine):
spatial tiles with symmetric overlaps; temporal chunks split causally. The decoder turns a chunk's
first latent frame into one pixel frame (as it does for the clip's first frame), so every chunk after
the first starts one latent frame early and gets weight 0 on that frame; only the chunk before it
counts there.

NOTE [vae blend]: ltx-core weights each tile's pixels by a separable trapezoid m_t*m_h*m_w and
divides the sum by the summed masks. Here each axis's masks are divided by their per-position sum
(in float64, stored as float32): the tiles form a full grid, so the sum over tiles of the products is
the product of the per-axis sums, and the normalised separable weights sum to one (up to float32
rounding); no division is left for decode time. The output is partitioned into regions: products of
per-axis segments along which the set of tiles with nonzero weight does not change. A region covered
by one tile takes that tile's pixels (its weight is exactly 1.0). A region covered by several is
finalised by exactly one rank, the owner of its lowest-numbered tile: once its last tile is decoded
(after that tile's round), it receives the other tiles' pixels of that region and adds the weighted
contributions in tile order. So the order of every sum is fixed by the plan, not by timing, nor by
the number of ranks: N ranks give the bits one gives.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..wire.constants import VIDEO_FRAMES_PER_CELL, VIDEO_PIXELS_PER_CELL
from ..wire.requests import AUTO, TileSettings

# Auto tiles are at most 16 latent cells (512 px) a side: ComfyUI's VAEDecodeTiled default tile
# (the LTX-2 template uses 512, 64, 4096, 8) and ltx-core's TilingConfig.default(). It bounds a
# worker's memory whatever the group size; more ranks make tiles smaller still.
MAX_AUTO_TILE_CELLS = 16
# Auto tiles are at least 4 cells (128 px) a side: below that, the overlap a tile decodes twice
# costs more than the parallelism gains.
MIN_AUTO_TILE_CELLS = 4
FRAMES_PER_CELL = VIDEO_FRAMES_PER_CELL
PIXELS_PER_CELL = VIDEO_PIXELS_PER_CELL
# ltx-core's limit on a temporal chunk (ltx_core/model/video_vae/tiling.py TemporalTilingConfig).
MIN_TEMPORAL_FRAMES = 16


@dataclass(frozen=True)
class AxisSplit:
    """How one axis is cut, in latent cells: nominal tile length and overlap (ltx-core's split rule:
    tiles start every size - overlap cells, the last one ends at the axis end)."""

    size: int
    overlap: int


@dataclass(frozen=True)
class Segment:
    """Output positions [start, stop) along one axis covered by the same axis tiles (weight > 0)."""

    start: int
    stop: int
    tiles: tuple[int, ...]


@dataclass(frozen=True)
class AxisTiles:
    """The tiles along one axis. latent[i] / pixels[i]: [start, stop) of tile i in latent cells / in
    output positions; weights[i]: float32 [pixels[i] length], normalised (NOTE [vae blend])."""

    latent: tuple[tuple[int, int], ...]
    pixels: tuple[tuple[int, int], ...]
    weights: tuple[torch.Tensor, ...]
    segments: tuple[Segment, ...]

    @property
    def count(self) -> int:
        return len(self.latent)


@dataclass(frozen=True)
class Region:
    """A box of the output (t, h, w pixel spans) covered by the same tiles; see NOTE [vae blend]."""

    index: int
    pixels: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]
    tiles: tuple[int, ...]
    finalizer: int

    @property
    def is_shared(self) -> bool:
        return len(self.tiles) > 1


# One axis's tiles under a tiling rule: (latent span, pixel span, blend mask) per tile, for an axis of
# `length` latent cells cut by an AxisSplit, `temporal` or spatial. ltx-core's rule lives with its
# engine (engine/ltxcore/vae_tiling.py), so this plan imports no engine.
SpanRule = Callable[[int, "AxisSplit", bool], list[tuple[tuple[int, int], tuple[int, int], torch.Tensor]]]


def axis_tiles(length: int, split: AxisSplit, temporal: bool, rule: SpanRule) -> AxisTiles:
    """Tiles, normalised weights and segments along one axis of `length` latent cells."""
    spans = rule(length, split, temporal)
    total = 1 + (length - 1) * FRAMES_PER_CELL if temporal else length * PIXELS_PER_CELL
    summed = torch.zeros(total, dtype=torch.float64)
    for _, (start, stop), mask in spans:
        summed[start:stop] += mask.double()
    assert bool((summed > 0).all()), f"tile masks leave positions uncovered ({length}, {split})"
    weights = tuple((mask.double() / summed[start:stop]).float() for _, (start, stop), mask in spans)
    cover: list[tuple[int, ...]] = []
    for p in range(total):
        cover.append(
            tuple(i for i, (_, (s, e), _m) in enumerate(spans) if s <= p < e and weights[i][p - s] > 0)
        )
    segments, start = [], 0
    for p in range(1, total + 1):
        if p == total or cover[p] != cover[start]:
            segments.append(Segment(start, p, cover[start]))
            start = p
    return AxisTiles(
        latent=tuple(s[0] for s in spans),
        pixels=tuple(s[1] for s in spans),
        weights=weights,
        segments=tuple(segments),
    )


def _axis_options(length: int, overlap: int, rule: SpanRule) -> list[tuple[tuple[int, ...], AxisSplit]]:
    """Distinct ways to cut a spatial axis for auto tiling: (tile lengths, split), fewest tiles first."""
    options: dict[tuple[int, ...], AxisSplit] = {}
    for count in range(1, length + 1):
        size = length if count == 1 else -(-(length + overlap * (count - 1)) // count)
        if count > 1 and (size <= overlap or size < max(MIN_AUTO_TILE_CELLS, 2 * overlap)):
            break  # sizes only shrink as the count grows
        split = AxisSplit(size, overlap)
        lengths = tuple(e - s for (s, e), _, _ in rule(length, split, False))
        options.setdefault(lengths, split)
    return list(options.items())


def auto_spatial_splits(
    height: int, width: int, overlap: int, world_size: int, rule: SpanRule
) -> tuple[AxisSplit, AxisSplit]:
    """The spatial grid for AUTO tiles: tiles at most MAX_AUTO_TILE_CELLS a side, and among those the
    grid whose busiest rank decodes the fewest cells (round-robin, overlaps included); ties go to the
    smaller largest tile (memory), then to fewer tiles (fewer seams)."""

    def fitting(options: list[tuple[tuple[int, ...], AxisSplit]]) -> list[tuple[tuple[int, ...], AxisSplit]]:
        fit = [o for o in options if max(o[0]) <= MAX_AUTO_TILE_CELLS]
        return fit or [min(options, key=lambda o: max(o[0]))]

    best: tuple[tuple[int, int, int], AxisSplit, AxisSplit] | None = None
    for (lh, sh), (lw, sw) in itertools.product(
        fitting(_axis_options(height, overlap, rule)), fitting(_axis_options(width, overlap, rule))
    ):
        load = [0] * world_size
        for index, (h, w) in enumerate(itertools.product(lh, lw)):
            load[index % world_size] += h * w
        key = (max(load), max(lh) * max(lw), len(lh) * len(lw))
        if best is None or key < best[0]:
            best = (key, sh, sw)
    assert best is not None
    return best[1], best[2]


def check_ltxcore_tiles(settings: TileSettings) -> None:
    """ltx-core's tiles are whole latent cells and overlap by less than their size: the subset of
    VAEDecodeTiled's range (TileSettings) they can be cut by. ValueError saying what to change."""
    if settings.tile_px != AUTO and settings.overlap_px >= settings.tile_px:
        raise ValueError(
            f"overlap {settings.overlap_px} must be smaller than tile_size {settings.tile_px} for ltx-core's tiles; "
            f"set overlap to at most {settings.tile_px - PIXELS_PER_CELL}, or tile_size to 0 (auto)"
        )
    if settings.temporal_frames == AUTO:
        return  # one chunk: the temporal overlap is not used
    size, overlap = settings.temporal_frames, settings.temporal_overlap_frames
    if size < MIN_TEMPORAL_FRAMES or size % FRAMES_PER_CELL or overlap % FRAMES_PER_CELL:
        raise ValueError(
            f"temporal_size {size} / temporal_overlap {overlap} are not whole latent frames: ltx-core's tiles "
            f"take multiples of {FRAMES_PER_CELL} frames, temporal_size at least {MIN_TEMPORAL_FRAMES}. "
            "Use such values, or the comfy backend's tiled mode (VAEDecodeTiled's arithmetic takes any)."
        )
    if overlap >= size:
        raise ValueError(
            f"temporal_overlap {overlap} must be smaller than temporal_size {size} for ltx-core's tiles; set "
            f"temporal_overlap to at most {size - FRAMES_PER_CELL}, or temporal_size to 0 (the whole clip)"
        )


def resolve_splits(
    latent_fhw: tuple[int, int, int], settings: TileSettings, world_size: int, rule: SpanRule
) -> tuple[AxisSplit, AxisSplit, AxisSplit]:
    """Per-axis splits (time, height, width) in latent cells for `settings` on a latent of `latent_fhw`."""
    check_ltxcore_tiles(settings)
    f, h, w = latent_fhw
    if settings.temporal_frames == AUTO:
        split_t = AxisSplit(f, 0)
    else:
        split_t = AxisSplit(
            settings.temporal_frames // FRAMES_PER_CELL, settings.temporal_overlap_frames // FRAMES_PER_CELL
        )
    overlap = settings.overlap_px // PIXELS_PER_CELL
    if settings.tile_px == AUTO:
        split_h, split_w = auto_spatial_splits(h, w, overlap, world_size, rule)
        return split_t, split_h, split_w
    # ltx-core's rule (VideoDecoder._prepare_tiles): the tile size is for the long side, scaled on each
    # axis by the axis length over the long side, and never below max(2, overlap + 1).
    size, long_side = settings.tile_px // PIXELS_PER_CELL, max(h, w)
    floor = max(2, overlap + 1)
    split_h = AxisSplit(max(floor, round(size * h / long_side)), overlap)
    split_w = AxisSplit(max(floor, round(size * w / long_side)), overlap)
    return split_t, split_h, split_w


@dataclass(frozen=True)
class TilePlan:
    """The tiles of one decode and who does what (NOTE [vae tiles], NOTE [vae blend]).

    latent_fhw: (F, H, W) of the latent; axes: AxisTiles for time, height, width. Output positions
    are frames (8(F-1)+1) and pixels (32H, 32W).
    """

    latent_fhw: tuple[int, int, int]
    world_size: int
    axes: tuple[AxisTiles, AxisTiles, AxisTiles]

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.axes[0].count, self.axes[1].count, self.axes[2].count)

    @property
    def num_tiles(self) -> int:
        return math.prod(self.grid)

    @property
    def rounds(self) -> int:
        """Decode rounds: in round r, rank k decodes tile r * N + k (if it exists)."""
        return -(-self.num_tiles // self.world_size)

    @property
    def pixel_shape(self) -> tuple[int, int, int]:
        f, h, w = self.latent_fhw
        return (1 + (f - 1) * FRAMES_PER_CELL, h * PIXELS_PER_CELL, w * PIXELS_PER_CELL)

    def owner(self, tile: int) -> int:
        return tile % self.world_size

    def tiles_of(self, rank: int) -> list[int]:
        return list(range(rank, self.num_tiles, self.world_size))

    def axis_indices(self, tile: int) -> tuple[int, int, int]:
        _, nh, nw = self.grid
        return (tile // (nh * nw), (tile // nw) % nh, tile % nw)

    def latent_slices(self, tile: int) -> tuple[slice, slice, slice]:
        return tuple(slice(*axis.latent[i]) for axis, i in zip(self.axes, self.axis_indices(tile)))  # type: ignore[return-value]

    def pixel_slices(self, tile: int) -> tuple[slice, slice, slice]:
        return tuple(slice(*axis.pixels[i]) for axis, i in zip(self.axes, self.axis_indices(tile)))  # type: ignore[return-value]

    @functools.cached_property
    def regions(self) -> tuple[Region, ...]:
        _, nh, nw = self.grid
        out = []
        for st, sh, sw in itertools.product(*(axis.segments for axis in self.axes)):
            tiles = tuple((it * nh + ih) * nw + iw for it in st.tiles for ih in sh.tiles for iw in sw.tiles)
            pixels = ((st.start, st.stop), (sh.start, sh.stop), (sw.start, sw.stop))
            out.append(Region(len(out), pixels, tiles, self.owner(tiles[0])))
        return tuple(out)

    @functools.cached_property
    def _regions_by_tile(self) -> dict[int, tuple[Region, ...]]:
        by_tile: dict[int, list[Region]] = {t: [] for t in range(self.num_tiles)}
        for region in self.regions:
            for tile in region.tiles:
                by_tile[tile].append(region)
        return {t: tuple(rs) for t, rs in by_tile.items()}

    def regions_of(self, tile: int) -> tuple[Region, ...]:
        """Every region inside tile `tile`'s output box where its weight is nonzero, in region order."""
        return self._regions_by_tile[tile]

    def local_slices(self, region: Region, tile: int) -> tuple[slice, slice, slice]:
        """The region's position inside tile `tile`'s decoded pixels (frames, rows, columns)."""
        origin = [s.start for s in self.pixel_slices(tile)]
        return tuple(slice(a - o, b - o) for (a, b), o in zip(region.pixels, origin))  # type: ignore[return-value]

    def weight(self, region: Region, tile: int) -> torch.Tensor:
        """float32 [f, h, w]: tile `tile`'s blend weight over the region (product of the axis weights)."""
        idx = self.axis_indices(tile)
        local = self.local_slices(region, tile)
        wt, wh, ww = (axis.weights[i][s] for axis, i, s in zip(self.axes, idx, local))
        return wt[:, None, None] * wh[None, :, None] * ww[None, None, :]

    def ready_round(self, region: Region) -> int:
        """The decode round after which every tile covering `region` is decoded (its last tile's)."""
        return region.tiles[-1] // self.world_size

    @functools.cached_property
    def _shared_by_round(self) -> dict[int, tuple[Region, ...]]:
        by_round: dict[int, list[Region]] = {r: [] for r in range(self.rounds)}
        for region in self.regions:
            if region.is_shared:
                by_round[self.ready_round(region)].append(region)
        return {r: tuple(rs) for r, rs in by_round.items()}

    def shared_regions(self, round_: int) -> tuple[Region, ...]:
        """The shared regions that become complete in decode round `round_`, in region order."""
        return self._shared_by_round[round_]

    def transfers(self, source: int, target: int, round_: int) -> list[tuple[int, int]]:
        """(region index, tile) pairs whose pixels rank `source` sends to rank `target` in the overlap
        exchange after decode round `round_`, in the order both sides lay them out. Empty when
        source == target."""
        if source == target:
            return []
        return [
            (region.index, tile)
            for region in self.shared_regions(round_)
            if region.finalizer == target
            for tile in region.tiles
            if self.owner(tile) == source
        ]

    def describe(self) -> str:
        nt, nh, nw = self.grid
        longest = [max(b - a for a, b in axis.latent) for axis in self.axes]
        return (
            f"{self.num_tiles} tiles ({nt} x {nh} x {nw}, time x height x width) of up to "
            f"{longest[0]} x {longest[1]} x {longest[2]} latent cells on {self.world_size} rank(s)"
        )


def make_plan(
    latent_fhw: tuple[int, int, int], settings: TileSettings, world_size: int, rule: SpanRule
) -> TilePlan:
    """The tile plan for a latent of (F, H, W) cells on `world_size` ranks, tiles cut by `rule`."""
    splits = resolve_splits(latent_fhw, settings, world_size, rule)
    axes = tuple(axis_tiles(n, s, i == 0, rule) for i, (n, s) in enumerate(zip(latent_fhw, splits)))
    return TilePlan(tuple(latent_fhw), world_size, axes)  # type: ignore[arg-type]
