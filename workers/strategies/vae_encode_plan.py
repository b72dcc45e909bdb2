"""Work plan of the distributed VAE encode: pure functions, no process group, no model.

NOTE [encode slabs]: the frames are cut into bands (slabs) along the longer spatial axis, one per rank,
each a whole number of latent cells (32 px) thick, sizes differing by at most one cell; rank r owns
the latent cells of slab r, for every latent frame. Each rank runs ltx-core's VideoEncoder layer by
layer on its slab; before every convolution it swaps the rows a 3x3x3 kernel reaches past the slab's
edge with the neighbouring ranks (halo_exchange.py), so every output value is computed from
exactly the inputs the single-process encode uses, and no latent cell is computed twice. When the
axis has fewer cells than there are ranks, the last ranks get no slab (they only join the cancel
checks).

Why not tiles with overlap (the decode's way)? The encoder's receptive field is wide: one latent cell
of LTX-2's encoder depends on 488 px on each side and 218 frames before it (engine/ltxcore/encoder_reach.py).
Independent tiles are exact only with that much context, which makes them read 1.7x the untiled
pixels for a 2 x 1 split of 1024 x 1536 and gives almost no speed-up; with less context, cells at
the seams differ from the untiled encode by about the size of the latent itself (measured on the tiny
model and on LTX-2's architecture with random weights; docs/NODES.md, "Why bands and not tiles"). Exchanging one row per
convolution instead costs a few MB per layer.

NOTE [encode chunks]: time is streamed, as ComfyUI's own LTX-2 encoder does: chunk 0 holds frame 0
and the next `temporal_frames` frames, each later chunk `temporal_frames` frames (a multiple of 8, so
the encoder's frame pairs line up as in the whole clip). Every causal convolution keeps the last
frames it saw and uses them instead of repeating the chunk's first frame, and only chunk 0 repeats
frame 0 before a temporal downsampling, so the chunks give the values of the whole-clip encode while
a rank holds the activations of one chunk at a time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from .vae_tiles import AUTO, FRAMES_PER_CELL, PIXELS_PER_CELL

HEIGHT, WIDTH = "height", "width"
# Auto chunk length: frames of a rank's slab per chunk up to this many input pixels (2**24 = 64
# frames of 512 x 512). Estimate, not measured on a GPU: LTX-2's encoder holds about 100 bytes of bf16
# activations per input pixel at its first level (128 channels per 4 x 4 patch, a few tensors alive in
# a res block), so a chunk stays near 2 GB. ComfyUI streams its own encode in steps of the same order
# (get_max_chunk_size: 4 frames of 1080p on a GPU of 24 GB or more).
AUTO_CHUNK_PIXELS = 1 << 24


@dataclass(frozen=True)
class EncodePlan:
    """Who encodes what (NOTE [encode slabs], NOTE [encode chunks]).

    latent_fhw: (F, H, W) of the latent; frames = 8(F - 1) + 1 input frames of 32H x 32W pixels.
    axis: HEIGHT or WIDTH, the axis cut into slabs; slabs[r]: latent cells [start, stop) of rank r along
    it (ranks past len(slabs) are idle). chunks: input frames [start, stop) of each chunk, in order.
    """

    latent_fhw: tuple[int, int, int]
    world_size: int
    axis: str
    slabs: tuple[tuple[int, int], ...]
    chunks: tuple[tuple[int, int], ...]

    @property
    def frames(self) -> int:
        return 1 + (self.latent_fhw[0] - 1) * FRAMES_PER_CELL

    @property
    def axis_dim(self) -> int:
        """The slab axis in a [B, C, F, H, W] tensor."""
        return 3 if self.axis == HEIGHT else 4

    @property
    def active_ranks(self) -> int:
        return len(self.slabs)

    def is_active(self, rank: int) -> bool:
        return rank < self.active_ranks

    def neighbours(self, rank: int) -> tuple[int | None, int | None]:
        """The ranks holding the slabs before and after `rank`'s (None at the frame's edge)."""
        before = rank - 1 if rank > 0 else None
        after = rank + 1 if rank + 1 < self.active_ranks else None
        return before, after

    def pixel_slab(self, rank: int) -> slice:
        """Rows (or columns) of the input that `rank` encodes."""
        start, stop = self.slabs[rank]
        return slice(start * PIXELS_PER_CELL, stop * PIXELS_PER_CELL)

    def latent_slab(self, rank: int) -> slice:
        return slice(*self.slabs[rank])

    @staticmethod
    def latent_frames(chunk: tuple[int, int]) -> slice:
        """Latent frames a chunk of input frames [start, stop) yields (NOTE [encode chunks])."""
        start, stop = chunk
        first = 0 if start == 0 else (start - 1) // FRAMES_PER_CELL + 1
        return slice(first, (stop - 1) // FRAMES_PER_CELL + 1)

    def describe(self) -> str:
        sizes = sorted({b - a for a, b in self.slabs})
        longest = max(b - a for a, b in self.chunks)
        return (
            f"{self.active_ranks} slab(s) of {'/'.join(map(str, sizes))} latent cells along the {self.axis} "
            f"on {self.world_size} rank(s), {len(self.chunks)} chunk(s) of up to {longest} frames"
        )


def split_evenly(length: int, count: int) -> tuple[tuple[int, int], ...]:
    """`count` contiguous spans covering [0, length), sizes differing by at most one (larger first)."""
    base, extra = divmod(length, count)
    bounds = [0]
    for i in range(count):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return tuple(itertools.pairwise(bounds))


def auto_chunk_frames(slab_pixels: int) -> int:
    """Frames per chunk for a slab of `slab_pixels` pixels a frame (AUTO_CHUNK_PIXELS)."""
    return max(FRAMES_PER_CELL, AUTO_CHUNK_PIXELS // max(1, slab_pixels) // FRAMES_PER_CELL * FRAMES_PER_CELL)


def make_plan(latent_fhw: tuple[int, int, int], world_size: int, temporal_frames: int = AUTO) -> EncodePlan:
    """The plan for a latent of (F, H, W) cells on `world_size` ranks; `temporal_frames`: frames per
    chunk after frame 0 (a positive multiple of 8), or AUTO (chosen from the slab's size)."""
    if temporal_frames != AUTO and (temporal_frames < 0 or temporal_frames % FRAMES_PER_CELL):
        raise ValueError(
            f"temporal_size {temporal_frames} is not allowed: use 0 (auto) or a positive multiple of "
            f"{FRAMES_PER_CELL} frames"
        )
    f, h, w = latent_fhw
    axis, cells, across = (HEIGHT, h, w) if h >= w else (WIDTH, w, h)
    slabs = split_evenly(cells, min(world_size, cells))
    if temporal_frames == AUTO:
        thickest = max(b - a for a, b in slabs)
        temporal_frames = auto_chunk_frames(thickest * across * PIXELS_PER_CELL**2)
    frames = 1 + (f - 1) * FRAMES_PER_CELL
    bounds = [0, *range(1 + temporal_frames, frames, temporal_frames), frames]
    return EncodePlan((f, h, w), world_size, axis, slabs, tuple(itertools.pairwise(bounds)))


def slab_input(
    pixels: torch.Tensor, plan: EncodePlan, rank: int, chunk: tuple[int, int], device: torch.device, dtype
) -> torch.Tensor:
    """IMAGE values [frames, H, W, 3] -> this rank's part of a chunk [1, 3, f, h, w] in [-1, 1], as
    ComfyUI's VAE.process_input maps them (x * 2 - 1 in the IMAGE's dtype), then in `dtype`."""
    box = [slice(*chunk), slice(None), slice(None)]
    box[plan.axis_dim - 2] = plan.pixel_slab(rank)  # [F, H, W] of the IMAGE: the slab axis less 2
    piece = pixels[tuple(box)].to(device)
    return (piece * 2.0 - 1.0).to(dtype).permute(3, 0, 1, 2).unsqueeze(0).contiguous()


def latent_box(plan: EncodePlan, rank: int, chunk: tuple[int, int]) -> tuple[slice, ...]:
    """Where `rank`'s latent of `chunk` goes in the LATENT [1, 128, F, h, w]."""
    box = [slice(None), slice(None), plan.latent_frames(chunk), slice(None), slice(None)]
    box[plan.axis_dim] = plan.latent_slab(rank)
    return tuple(box)
