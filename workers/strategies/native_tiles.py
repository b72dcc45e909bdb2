"""VAEDecodeTiled's tiles for a video latent, as plain arithmetic: shared by the node (checks before any
work) and the ranks (comfy_vae_tiled.py decodes them). No ComfyUI import.

ComfyUI 0.33's VAEDecodeTiled.decode (nodes.py) turns its four settings into tile and overlap sizes in
latent cells (`tiled_decode_args`), and comfy.utils.tiled_scale_multidim cuts the latent into tiles
starting every `tile - overlap` cells, the last ones shifted back to end at the latent's edge, or into
one tile when every axis fits one (`axis_spans`, `num_tiles`). A tile narrower than the decoder can
take (decode_limits.min_decode_cells: 2 cells for LTX-2's reflection padding) fails inside the first
convolution on the one rank that decodes it; `check_native_tiles` refuses such settings first and
names settings that work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..wire.constants import VIDEO_FRAMES_PER_CELL, VIDEO_PIXELS_PER_CELL
from ..wire.requests import AUTO, TILE_PX_RANGE, TileSettings
from .decode_limits import REFLECT, min_decode_cells

# VAEDecodeTiled's defaults (nodes.py, ComfyUI 0.33), used for a setting left at 0 (auto).
NATIVE_TILE_PX = 512
NATIVE_TEMPORAL_FRAMES = 64
TILE_PX_STEP = TILE_PX_RANGE[2]


@dataclass(frozen=True)
class TiledDecodeArgs:
    """comfy.utils.tiled_scale_multidim's tile and overlap for a video latent: (time, height, width) in
    latent cells; what VAE.decode_tiled_3d passes for VAEDecodeTiled's settings."""

    tile: tuple[int, int, int]
    overlap: tuple[int, int, int]

    def describe(self) -> str:
        return f"tiles of {self.tile} latent cells (t, h, w) overlapping by {self.overlap}"


def tiled_decode_args(
    settings: TileSettings,
    time_ratio: int = VIDEO_FRAMES_PER_CELL,
    space_ratio: int = VIDEO_PIXELS_PER_CELL,
) -> TiledDecodeArgs:
    """VAEDecodeTiled.decode's arithmetic (nodes.py) followed by VAE.decode_tiled's (comfy/sd.py) for a
    3D latent of a VAE that compresses time by `time_ratio` and space by `space_ratio`; AUTO for the
    tile size or the temporal size means VAEDecodeTiled's default."""
    tile_size = settings.tile_px or NATIVE_TILE_PX
    temporal_size = settings.temporal_frames or NATIVE_TEMPORAL_FRAMES
    overlap, temporal_overlap = settings.overlap_px, settings.temporal_overlap_frames
    if tile_size < overlap * 4:
        overlap = tile_size // 4
    if temporal_size < temporal_overlap * 2:
        temporal_overlap = temporal_overlap // 2
    tile_t = max(2, temporal_size // time_ratio)
    overlap_t = max(1, min(tile_t // 2, temporal_overlap // time_ratio))
    tile_xy, overlap_xy = tile_size // space_ratio, overlap // space_ratio
    return TiledDecodeArgs((max(2, tile_t), tile_xy, tile_xy), (max(1, overlap_t), overlap_xy, overlap_xy))


def axis_spans(length: int, tile: int, overlap: int) -> list[tuple[int, int]]:
    """(start, cells) of the tiles along one axis of `length` cells, as tiled_scale_multidim cuts it when
    some axis needs more than one tile."""
    if length <= tile:
        return [(0, length)]
    spans = []
    for it in range(0, length - overlap, tile - overlap):
        start = max(0, min(length - overlap, it))
        spans.append((start, min(tile, length - start)))
    return spans


def tile_grid(latent_fhw: tuple[int, int, int], args: TiledDecodeArgs) -> list[list[tuple[int, int]]]:
    """The tiles' (start, cells) per axis (time, height, width); one tile of the whole latent when it
    fits one (tiled_scale_multidim decodes it in one call then)."""
    if all(n <= t for n, t in zip(latent_fhw, args.tile)):
        return [[(0, n)] for n in latent_fhw]
    if any(t <= o for t, o in zip(args.tile, args.overlap)):  # VAEDecodeTiled never gives these
        raise ValueError(f"tiles of {args.tile} cells overlapping by {args.overlap} do not advance")
    return [axis_spans(n, t, o) for n, t, o in zip(latent_fhw, args.tile, args.overlap)]


def num_tiles(latent_fhw: tuple[int, int, int], args: TiledDecodeArgs) -> int:
    """Decoder calls tiled_scale_multidim makes for one latent of the batch."""
    return math.prod(len(spans) for spans in tile_grid(latent_fhw, args))


def narrowest_tile(latent_fhw: tuple[int, int, int], args: TiledDecodeArgs) -> tuple[str, int]:
    """(axis name, cells) of the narrowest spatial tile side."""
    grid = tile_grid(latent_fhw, args)
    return min(
        ((name, cells) for name, spans in zip(("height", "width"), grid[1:]) for _, cells in spans),
        key=lambda item: item[1],
    )


def tiles_fit(latent_fhw: tuple[int, int, int], settings: TileSettings, padding_mode: str = REFLECT) -> bool:
    try:
        return narrowest_tile(latent_fhw, tiled_decode_args(settings))[1] >= min_decode_cells(padding_mode)
    except ValueError:
        return False


def check_native_tiles(
    latent_fhw: tuple[int, int, int],
    settings: TileSettings,
    padding_mode: str = REFLECT,
    args: TiledDecodeArgs | None = None,
) -> None:
    """Raise ValueError, naming tile sizes that work, when VAEDecodeTiled's tiles for `settings` leave a
    tile side narrower than the decoder takes (e.g. 3 cells, tile_size 64, overlap 0: tiles of 2 and 1).
    `args`: the tiles a rank derived from its VAE's ratios (default: LTX's, from `settings`)."""
    args = args or tiled_decode_args(settings)
    need = min_decode_cells(padding_mode)
    axis, cells = narrowest_tile(latent_fhw, args)
    if cells >= need:
        return
    _, height, width = latent_fhw
    sizes = (
        f"{width * VIDEO_PIXELS_PER_CELL} x {height * VIDEO_PIXELS_PER_CELL} px ({width} x {height} cells)"
    )
    raise ValueError(
        f"tiled decode: tile_size {settings.tile_px or f'0 (auto, {NATIVE_TILE_PX})'} with overlap "
        f"{settings.overlap_px} cuts the {sizes} video "
        f"into tiles of which one is {cells} cell{'' if cells == 1 else 's'} ({cells * VIDEO_PIXELS_PER_CELL} px) "
        f"along the {axis}; the VAE decoder needs at least {need} cells ({need * VIDEO_PIXELS_PER_CELL} px) per "
        f"tile side. {_working_sizes(latent_fhw, settings, padding_mode)}"
    )


def _working_sizes(latent_fhw: tuple[int, int, int], settings: TileSettings, padding_mode: str) -> str:
    """What to set instead: the nearest tile sizes (same overlap) that work, auto when it does, or the
    exact mode (which has no tiles)."""
    candidates = range(TILE_PX_RANGE[0], TILE_PX_RANGE[1] + 1, TILE_PX_STEP)
    current = settings.tile_px or NATIVE_TILE_PX
    working = [
        px
        for px in candidates
        if px != current and tiles_fit(latent_fhw, _with_tile(settings, px), padding_mode)
    ]
    nearest = sorted(sorted(working, key=lambda px: (abs(px - current), px))[:2])
    options = [f"tile_size to {' or '.join(map(str, nearest))} (same overlap)"] if nearest else []
    if settings.tile_px != AUTO and tiles_fit(latent_fhw, _with_tile(settings, AUTO), padding_mode):
        options.append(f"tile_size to 0 (auto: VAEDecodeTiled's {NATIVE_TILE_PX} px)")
    options.append("mode to exact")
    return f"Set {', or '.join(options)}"


def _with_tile(settings: TileSettings, tile_px: int) -> TileSettings:
    return TileSettings(
        tile_px, settings.overlap_px, settings.temporal_frames, settings.temporal_overlap_frames
    )
