"""VAEDecodeTiled's result over the group: ComfyUI's own tiled decode with the tiles dealt round-robin.

Every rank runs comfy.utils.tiled_scale_multidim with the arguments ComfyUI's VAEDecodeTiled node and
VAE.decode_tiled derive from the node's four settings (`tiled_decode_args`), on the whole latent.
The decode function it calls decodes tile i only on rank i mod N and gives zeros elsewhere; the
feathering weights of all tiles still add up on every rank, so after its division each rank holds its
own tiles' share of the final frames, and a sum over the ranks (all_reduce) is VAEDecodeTiled's
output up to float rounding of that sum. Memory per rank: one tile's decode plus the whole output
and its weight sum (float32, on `output_device`), as VAEDecodeTiled itself holds.
LTX-2.5's diffusion VAE draws noise in every decode call from a generator seeded 0 on its device, so
a tile decoded on rank i gets the noise VAEDecodeTiled gives it: tiles stay independent.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from comfy import utils as comfy_utils

# VAEDecodeTiled's defaults (nodes.py, ComfyUI 0.33), used for a setting left at 0 (auto).
NATIVE_TILE_PX = 512
NATIVE_TEMPORAL_FRAMES = 64


@dataclass(frozen=True)
class TiledDecodeArgs:
    """comfy.utils.tiled_scale_multidim's tile and overlap for a video latent: (time, height, width) in
    latent cells; what VAE.decode_tiled_3d passes for VAEDecodeTiled's settings."""

    tile: tuple[int, int, int]
    overlap: tuple[int, int, int]

    def describe(self) -> str:
        return f"tiles of {self.tile} latent cells (t, h, w) overlapping by {self.overlap}"


def tiled_decode_args(
    vae, tile_px: int, overlap_px: int, temporal_frames: int, temporal_overlap_frames: int
) -> TiledDecodeArgs:
    """VAEDecodeTiled.decode's arithmetic (nodes.py) followed by VAE.decode_tiled's (comfy/sd.py) for a
    3D latent; 0 for tile_px or temporal_frames means VAEDecodeTiled's default."""
    tile_size = tile_px or NATIVE_TILE_PX
    temporal_size = temporal_frames or NATIVE_TEMPORAL_FRAMES
    overlap, temporal_overlap = overlap_px, temporal_overlap_frames
    if tile_size < overlap * 4:
        overlap = tile_size // 4
    if temporal_size < temporal_overlap * 2:
        temporal_overlap = temporal_overlap // 2
    time_ratio = vae.temporal_compression_decode()
    tile_t = max(2, temporal_size // time_ratio)
    overlap_t = max(1, min(tile_t // 2, temporal_overlap // time_ratio))
    space_ratio = vae.spacial_compression_decode()
    tile_xy, overlap_xy = tile_size // space_ratio, overlap // space_ratio
    return TiledDecodeArgs((max(2, tile_t), tile_xy, tile_xy), (max(1, overlap_t), overlap_xy, overlap_xy))


def check_tiled(vae) -> str | None:
    """Why this VAE's VAEDecodeTiled is not the path reproduced here, or None."""
    if vae.handles_tiling or vae.latent_dim != 3:
        return "its VAE tiles itself (VAE.handles_tiling) or is not a video VAE"
    if not hasattr(vae.first_stage_model, "decode_output_shape") and not _scales_by_ratio(vae):
        return f"its {type(vae.first_stage_model).__name__} gives no way to size a tile's output"
    return None


def _scales_by_ratio(vae) -> bool:
    ratio = vae.upscale_ratio
    return isinstance(ratio, (tuple, list)) and len(ratio) == 3


def tile_output_shape(vae, tile_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape VAE.first_stage_model.decode gives a latent tile [B, C, t, h, w], without decoding it.
    LTX-2's conv decoders say it (decode_output_shape); LTX-2.5's diffusion VAE decodes every tile as a
    clip of its own, so its output is what VAE.upscale_ratio gives, the rule tiled_scale_multidim sizes
    the whole output by (checked against every tile a rank decodes)."""
    model = vae.first_stage_model
    if hasattr(model, "decode_output_shape"):
        return tuple(model.decode_output_shape(tile_shape))
    scaled = [round(up(n)) if callable(up) else up * n for up, n in zip(vae.upscale_ratio, tile_shape[2:])]
    return (tile_shape[0], vae.output_channels, *scaled)


def decode_share(
    vae, latent: torch.Tensor, args: TiledDecodeArgs, rank: int, world_size: int, output_device: torch.device
) -> tuple[torch.Tensor, int]:
    """This rank's share of VAEDecodeTiled's decoder output [B, 3, frames, H, W] (float32, before
    process_output) and the number of tiles it decoded. Not collective."""
    calls = 0
    decoded = 0
    model = vae.first_stage_model
    out_dtype = vae.vae_output_dtype()

    def decode(tile: torch.Tensor) -> torch.Tensor:
        nonlocal calls, decoded
        index, calls = calls, calls + 1
        shape = tile_output_shape(vae, tuple(tile.shape))
        if index % world_size != rank:
            return torch.zeros(shape, dtype=out_dtype, device=output_device)
        decoded += 1
        pixels = model.decode(tile.to(vae.vae_dtype).to(vae.device)).to(dtype=out_dtype)
        if tuple(pixels.shape) != shape:
            # The other ranks weighed this tile by `shape`: a mismatch would blend the frames wrongly.
            raise RuntimeError(f"a tile of {tuple(tile.shape)} decoded to {tuple(pixels.shape)}, not {shape}")
        return pixels

    share = comfy_utils.tiled_scale_multidim(
        latent,
        decode,
        tile=args.tile,
        overlap=args.overlap,
        upscale_amount=vae.upscale_ratio,
        out_channels=vae.output_channels,
        index_formulas=vae.upscale_index_formula,
        output_device=output_device,
    )
    return share, decoded


def decode_tiled(
    vae, latent: torch.Tensor, args: TiledDecodeArgs, rank: int, world_size: int, output_device: torch.device
) -> tuple[torch.Tensor, int]:
    """Collective: every rank gets the whole of VAEDecodeTiled's output [B, 3, frames, H, W] as IMAGE
    values (process_output applied), and the number of tiles it decoded itself."""
    share, decoded = decode_share(vae, latent, args, rank, world_size, output_device)
    if world_size > 1:
        dist.all_reduce(share)
    return vae.process_output(share), decoded
