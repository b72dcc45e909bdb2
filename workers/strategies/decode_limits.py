"""The smallest video latent LTX-2's decoders can take: checked on the node and on every rank before any
work, for both backends (ComfyUI's VAE and ltx-core's), so a latent that cannot decode is refused at
once with the size that works instead of failing inside the first layer on some ranks.

LTX-2, 2.3 and the tiny checkpoint pad their decoder's convolutions by reflection in space
(spatial_padding_mode "reflect"); a reflection pad of one row needs two rows, so a latent side of one
cell fails in the first convolution (torch: "Padding size should be less than the corresponding input
dimension"; measured in ComfyUI 0.33: [1, 128, 1, 1, 1] and [1, 128, 1, 2, 1] fail, [1, 128, 1, 2, 2]
decodes). Zero or replicate padding takes a single row.
"""

from __future__ import annotations

from .vae_tiles import PIXELS_PER_CELL, TilePlan

REFLECT = "reflect"
# LTX-2.5's diffusion decoder pads nothing: its layers are linear, and its neighbourhood attention
# shrinks a kernel longer than the axis to the axis (ComfyUI 0.33 decodes a [1, 128, 2, 1, 1] latent).
NO_PADDING = "none"


def min_decode_cells(padding_mode: str = REFLECT) -> int:
    """Latent cells a spatial side needs for a decoder whose convolutions pad by `padding_mode`
    (torch's Conv3d padding_mode names: "zeros", "reflect", "replicate"; NO_PADDING for the diffusion
    decoder)."""
    return 2 if padding_mode == REFLECT else 1


def check_decodable(latent_shape: tuple[int, ...], padding_mode: str = REFLECT) -> None:
    """Raise ValueError, naming the smallest size that works, when the video latent [B, C, F, h, w] is
    too small in height or width for the decoder."""
    height, width = latent_shape[-2:]
    need = min_decode_cells(padding_mode)
    if min(height, width) < need:
        raise ValueError(
            f"the video latent is {width} x {height} cells ({width * PIXELS_PER_CELL} x "
            f"{height * PIXELS_PER_CELL} px), too small for the VAE decoder: each side needs at least {need} "
            f"cells ({need * PIXELS_PER_CELL} px), so the smallest latent that decodes is "
            f"[B, 128, F, {need}, {need}] ({need * PIXELS_PER_CELL} x {need * PIXELS_PER_CELL} px). Make the "
            f"video at least {need * PIXELS_PER_CELL} px on each side (EmptyLTXVLatentVideo width and height)"
        )


def check_tiles_decodable(plan: TilePlan, padding_mode: str = REFLECT) -> None:
    """Raise ValueError when a tile of `plan` is too narrow for the decoder: an explicit tile_size and
    overlap can leave a last tile of one cell on a side that has two or more (3 cells, tile_size 64,
    overlap 0: tiles of 2 and 1), which only the rank decoding it would find out."""
    need = min_decode_cells(padding_mode)
    for name, axis in zip(("height", "width"), plan.axes[1:]):
        narrowest = min(stop - start for start, stop in axis.latent)
        if narrowest < need:
            raise ValueError(
                f"the tiles leave one {narrowest} cell{'' if narrowest == 1 else 's'} along {name} "
                f"({narrowest * PIXELS_PER_CELL} px); the VAE decoder needs at least {need} cells "
                f"({need * PIXELS_PER_CELL} px) per tile side. Set tile_size to 0 (auto), or change tile_size "
                "or overlap by one cell (32 px)"
            )
