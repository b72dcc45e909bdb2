"""Exact distributed decode with ComfyUI's LTX-2 video VAE: VAEDecode's frames, the frame split in slabs.

Collective among the active ranks of `decode_plan`. Each rank decodes the latent rows of its slab with
ComfyUI's Decoder modules (NOTE [comfy vae slabs] in vae_halo.py) and writes its rows of every
frame into the shared IMAGE, as ComfyUI's VAE.process_output maps them; nothing else travels.

The walk through the decoder is Decoder.forward_orig and run_up of
comfy/ldm/lightricks/vae/causal_video_autoencoder.py (ComfyUI 0.33) for a decoder without timestep
conditioning, with one change: run_up splits an activation into time chunks by its size in bytes, which
differs between slabs and would make ranks run different numbers of convolutions (and hang in the
exchange). Here the count comes from the size the whole frame's activation has, so every rank, and the
whole-frame VAEDecode, cut time at the same frames. tests/test_comfy_vae.py compares against
VAEDecode and fails when that code changes shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from comfy.ldm.lightricks.vae import causal_video_autoencoder as cva

from ...strategies.decode_limits import min_decode_cells
from ...strategies.halo_exchange import HaloExchange
from ...strategies.vae_encode_plan import HEIGHT, WIDTH, EncodePlan, split_evenly
from ...strategies.vae_tiles import FRAMES_PER_CELL
from .vae_halo import SlabConvolutions, UnitFn, clear_temporal_caches

# write(first frame, pixels [B, 3, t, rows, cols] in the VAE's dtype, on its device): the decoder's
# output for frames [first, first + t) of this rank's slab, in order.
WriteFn = Callable[[int, torch.Tensor], None]


def decode_plan(latent_fhw: tuple[int, int, int], world_size: int, padding_mode: str) -> EncodePlan:
    """Slabs of rows (or of columns, see below), each at least as thick as the decoder's padding
    needs at the frame's real edges (decode_limits.py), sizes differing by at most one cell; ranks past
    the last slab idle. One time chunk: the decoder streams time itself."""
    f, h, w = latent_fhw
    thinnest = min_decode_cells(padding_mode)
    # Rows, unless columns give more ranks work: a row slab keeps every convolution's innermost (width)
    # loop as long as the whole frame's, which is what made the output bit-identical to VAEDecode on
    # the CPU (column slabs differed by up to 1e-6, the vectorised loop split elsewhere).
    axis, cells = (HEIGHT, h) if h // thinnest >= min(world_size, w // thinnest) else (WIDTH, w)
    count = max(1, min(world_size, cells // thinnest))
    frames = 1 + (f - 1) * FRAMES_PER_CELL
    return EncodePlan(latent_fhw, world_size, axis, split_evenly(cells, count), ((0, frames),))


def describe_slabs(plan: EncodePlan) -> str:
    """For results and the console: how the frame was cut."""
    sizes = "/".join(str(size) for size in sorted({b - a for a, b in plan.slabs}))
    rows = "rows" if plan.axis == HEIGHT else "columns"
    return f"{plan.active_ranks} band(s) of {sizes} latent {rows} on {plan.world_size} rank(s)"


def padding_mode(decoder: torch.nn.Module) -> str:
    return decoder.conv_in.conv.padding_mode


class SlabDecoder:
    """One active rank's part of an exact decode (see the module docstring).

    vae: comfy.sd.VAE holding LTX-2's VideoVAE; plan: decode_plan's; exchange: this rank's HaloExchange
    on that plan; on_unit: the unit boundary before every convolution (SlabConvolutions).
    """

    def __init__(
        self, vae, plan: EncodePlan, rank: int, exchange: HaloExchange, on_unit: UnitFn | None = None
    ) -> None:
        self.vae = vae
        self.on_unit = on_unit
        self.model = vae.first_stage_model
        self.decoder = self.model.decoder
        self.plan = plan
        self.rank = rank
        self.exchange = exchange
        self.seconds = 0.0

    def latent_box(self) -> tuple[slice, ...]:
        box = [slice(None)] * 5
        box[self.plan.axis_dim] = self.plan.latent_slab(self.rank)
        return tuple(box)

    def run(self, latent: torch.Tensor, write: WriteFn) -> None:
        """Decode this rank's rows of `latent` [B, 128, F, h, w] (normalised, as LATENT holds it)."""
        start = time.perf_counter()
        decoder = self.decoder
        x = latent[self.latent_box()].to(device=self.vae.device, dtype=self.vae.vae_dtype)
        x = self.model.per_channel_statistics.un_normalize(x)
        self._frame = 0
        self._write = write
        with SlabConvolutions(decoder, self.exchange, self.on_unit):
            try:
                cva.mark_conv3d_ended(decoder.conv_in)
                ref = [decoder.conv_in(x, causal=decoder.causal)]
                del x
                self._up(0, ref, True, cva.get_max_chunk_size(self.vae.device))
            finally:
                clear_temporal_caches(decoder)
        self.seconds += time.perf_counter() - start

    def _whole_frame_bytes(self, sample: torch.Tensor) -> int:
        """The bytes this activation has in the whole-frame decode (rows scale with the slab's cells)."""
        start, stop = self.plan.slabs[self.rank]
        total = self.plan.latent_fhw[1] if self.plan.axis == HEIGHT else self.plan.latent_fhw[2]
        return sample.numel() // (stop - start) * total * sample.element_size()

    def _up(self, index: int, ref: list, ended: bool, max_chunk_bytes: int) -> None:
        decoder = self.decoder
        sample = ref.pop()  # the caller keeps no reference: each level frees its input when done
        if index == len(decoder.up_blocks):
            sample = decoder.conv_act(decoder.conv_norm_out(sample))
            if ended:
                cva.mark_conv3d_ended(decoder.conv_out)
            sample = decoder.conv_out(sample, causal=decoder.causal)
            if sample is not None and sample.shape[2] > 0:
                pixels = cva.unpatchify(sample, patch_size_hw=decoder.patch_size, patch_size_t=1)
                self._write(self._frame, pixels)
                self._frame += pixels.shape[2]
            return
        block = decoder.up_blocks[index]
        if ended:
            cva.mark_conv3d_ended(block)
        sample = block(sample, causal=decoder.causal)
        if sample is None or sample.shape[2] == 0:
            return
        num_chunks = -(-self._whole_frame_bytes(sample) // max_chunk_bytes)
        if num_chunks == 1:
            ref.append(sample)
            del sample
            self._up(index + 1, ref, ended, max_chunk_bytes)
            return
        chunks = list(torch.chunk(sample, chunks=num_chunks, dim=2))
        del sample
        last = len(chunks) - 1
        for i in range(len(chunks)):
            self._up(index + 1, [chunks[i]], ended and i == last, max_chunk_bytes)
            chunks[i] = None
