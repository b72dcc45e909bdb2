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

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from comfy import utils as comfy_utils
from torch import nn

from ...strategies.native_tiles import TiledDecodeArgs
from ...strategies.native_tiles import tiled_decode_args as native_tiled_decode_args
from ...wire.requests import TileSettings

# After the last tile of every round (tile i on rank i mod N) and on every rank: (tiles done, of
# total). The unit boundary where the ranks agree on cancel (NOTE [units] in workers/engine/units.py).
RoundFn = Callable[[int, int], None]
# A tile's decode failed on this rank (its message): the next round's boundary tells every rank.
FailFn = Callable[[str], None]
# Whether this rank has seen a cancel request (a local read; the next boundary agrees on it).
StopFn = Callable[[], bool]


class _TileStopped(Exception):
    """A cancel seen inside a tile's decode: the tile is dropped, the round's boundary cancels."""


@contextmanager
def _stoppable(model: nn.Module, should_stop: StopFn | None) -> Iterator[None]:
    """While decoding one tile, every leaf module checks `should_stop` before it runs, so a cancel
    waits for one layer, not a whole tile. Safe because the cancel request never goes away within a
    job: a rank that drops its tile raises the cancel at the boundary (NOTE [units])."""
    if should_stop is None:
        yield
        return

    def check(_module: nn.Module, _inputs: tuple) -> None:
        if should_stop():
            raise _TileStopped

    leaves = [m for m in model.modules() if next(m.children(), None) is None]
    handles = [m.register_forward_pre_hook(check) for m in leaves]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def tiled_decode_args(vae, tiles: TileSettings) -> TiledDecodeArgs:
    """VAEDecodeTiled's tile and overlap for this VAE's compression (native_tiles.py)."""
    return native_tiled_decode_args(
        tiles, vae.temporal_compression_decode(), vae.spacial_compression_decode()
    )


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
    vae,
    latent: torch.Tensor,
    args: TiledDecodeArgs,
    rank: int,
    world_size: int,
    output_device: torch.device,
    total_tiles: int,
    on_round: RoundFn | None = None,
    on_error: FailFn | None = None,
    should_stop: StopFn | None = None,
) -> tuple[torch.Tensor, int]:
    """This rank's share of VAEDecodeTiled's decoder output [B, 3, frames, H, W] (float32, before
    process_output) and the number of tiles it decoded. Collective only through `on_round`, which
    every rank calls after the same tiles. A tile that fails here goes to `on_error` (when given)
    and counts as zeros, so the ranks stay in step until the round's boundary raises it everywhere;
    a tile stopped by `should_stop` (a cancel seen mid-tile) too, and that boundary cancels."""
    calls = 0
    decoded = 0
    model = vae.first_stage_model
    out_dtype = vae.vae_output_dtype()
    all_tiles = total_tiles * latent.shape[0]  # tiled_scale_multidim walks the batch item by item

    def decode(tile: torch.Tensor) -> torch.Tensor:
        nonlocal calls, decoded
        index, calls = calls, calls + 1
        shape = tile_output_shape(vae, tuple(tile.shape))
        pixels = None
        if index % world_size == rank:
            decoded += 1
            try:
                with _stoppable(model, should_stop):
                    pixels = _decode_tile(model, vae, tile, shape, out_dtype)
            except _TileStopped:
                pass  # zeros; the boundary below raises the cancel on every rank
            except (RuntimeError, ValueError) as exc:  # torch's errors: shapes, memory
                if on_error is None:
                    raise
                on_error(f"tile {index + 1} of {all_tiles} (latent {list(tile.shape)}) failed: {exc}")
        if on_round is not None and (index % world_size == world_size - 1 or calls % total_tiles == 0):
            on_round(calls, all_tiles)
        if pixels is None:
            return torch.zeros(shape, dtype=out_dtype, device=output_device)
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


def _decode_tile(
    model, vae, tile: torch.Tensor, shape: tuple[int, ...], out_dtype: torch.dtype
) -> torch.Tensor:
    pixels = model.decode(tile.to(vae.vae_dtype).to(vae.device)).to(dtype=out_dtype)
    if tuple(pixels.shape) != shape:
        # The other ranks weighed this tile by `shape`: a mismatch would blend the frames wrongly.
        raise RuntimeError(f"a tile of {tuple(tile.shape)} decoded to {tuple(pixels.shape)}, not {shape}")
    return pixels


def decode_tiled(
    vae,
    latent: torch.Tensor,
    args: TiledDecodeArgs,
    rank: int,
    world_size: int,
    output_device: torch.device,
    total_tiles: int,
    on_round: RoundFn | None = None,
    on_error: FailFn | None = None,
    should_stop: StopFn | None = None,
) -> tuple[torch.Tensor, int]:
    """Collective: every rank gets the whole of VAEDecodeTiled's output [B, 3, frames, H, W] as IMAGE
    values (process_output applied), and the number of tiles it decoded itself. `total_tiles`: the
    decoder calls per batch item (native_tiles.num_tiles)."""
    share, decoded = decode_share(
        vae, latent, args, rank, world_size, output_device, total_tiles, on_round, on_error, should_stop
    )
    if world_size > 1:
        dist.all_reduce(share)
    return vae.process_output(share), decoded
