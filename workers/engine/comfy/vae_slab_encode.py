"""Exact distributed encode with ComfyUI's LTX-2 video VAE: VAEEncode's latent, the frame split in slabs.

Collective among the active ranks of the EncodePlan (NOTE [encode slabs]). Each rank runs ComfyUI's
Encoder modules on the pixels of its slab (NOTE [comfy vae slabs] in vae_halo.py) and returns
the normalised latent means of its latent rows.

The walk is Encoder.forward_orig of comfy/ldm/lightricks/vae/causal_video_autoencoder.py (ComfyUI
0.33) followed by VideoVAE.encode, with one change: forward_orig sizes its time chunks from the bytes
of one input frame, which differ between slabs; here they come from the whole frame's, so every rank,
and the whole-frame VAEEncode, cut time at the same frames (the causal caches carry the rest).
tests/test_comfy_vae.py compares against VAEEncode and fails when that code changes shape.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from comfy.ldm.lightricks.vae import causal_video_autoencoder as cva

from ...strategies.halo_exchange import HaloExchange
from ...strategies.vae_encode_plan import HEIGHT, EncodePlan
from ...strategies.vae_memory import chunk_frames
from .vae_halo import SlabConvolutions, UnitFn, clear_temporal_caches

ChunkFn = Callable[[int, int], None]  # (time chunks done, of total)


class SlabEncoder:
    """One active rank's part of an exact encode (see the module docstring). vae: comfy.sd.VAE holding
    LTX-2's VideoVAE."""

    def __init__(
        self, vae, plan: EncodePlan, rank: int, exchange: HaloExchange, on_unit: UnitFn | None = None
    ) -> None:
        self.vae = vae
        self.on_unit = on_unit  # the unit boundary before every convolution (SlabConvolutions)
        self.model = vae.first_stage_model
        self.encoder = self.model.encoder
        self.plan = plan
        self.rank = rank
        self.exchange = exchange
        self.seconds = 0.0

    def _whole_frame_bytes(self, pixels: torch.Tensor) -> int:
        """Bytes of one frame of the whole-frame input after conv_in (Encoder.forward_orig's frame_size)."""
        start, stop = self.plan.slabs[self.rank]
        total = self.plan.latent_fhw[1] if self.plan.axis == HEIGHT else self.plan.latent_fhw[2]
        frame = pixels[:, :, :1].numel() // (stop - start) * total * pixels.element_size()
        conv_in = self.encoder.conv_in
        return int(frame * (conv_in.out_channels / conv_in.in_channels))

    def run(self, pixels: torch.Tensor, on_chunk: ChunkFn | None = None) -> torch.Tensor:
        """pixels [B, 3, frames, rows, cols] of this rank's slab, in [-1, 1] and the VAE's dtype (any
        device; chunks move to the VAE's) -> its latent [B, 128, F, rows / 32, cols / 32], normalised
        as VAEEncode returns it, on the VAE's device. on_chunk(done, total) after every time chunk."""
        start = time.perf_counter()
        encoder = self.encoder
        chunks = [pixels[:, :, :1]]
        if pixels.shape[2] > 1:
            max_chunk = cva.get_max_chunk_size(self.vae.device) * 2  # as forward_orig: the encoder's is 2x
            step = chunk_frames(self._whole_frame_bytes(pixels), max_chunk)
            chunks += list(torch.split(pixels[:, :, 1:], step, dim=2))
        outputs = []
        with SlabConvolutions(encoder, self.exchange, self.on_unit):
            try:
                for index, chunk in enumerate(chunks):
                    if index == len(chunks) - 1:
                        cva.mark_conv3d_ended(encoder)
                    chunk = cva.patchify(chunk, patch_size_hw=encoder.patch_size, patch_size_t=1)
                    output = encoder._forward_chunk(chunk.to(device=self.vae.device))
                    if output is not None:
                        outputs.append(output)
                    if on_chunk is not None:
                        on_chunk(index + 1, len(chunks))
            finally:
                clear_temporal_caches(encoder)
        means, _ = torch.chunk(torch.cat(outputs, dim=2), 2, dim=1)
        latent = self.model.per_channel_statistics.normalize(means)
        self.seconds += time.perf_counter() - start
        return latent
