"""Exact distributed decode with LTX-2.5's diffusion video VAE: VAEDecode's frames, the frame in bands.

Collective among the active ranks of a BandPlan (NOTE [na bands] in na_bands.py: who owns what, why
the halo is exchanged per NA layer). Each rank runs ComfyUI's own modules of NADiffusionDecoder
(comfy/ldm/lightricks/vae/na_diffusion_decoder.py, ComfyUI 0.33) on its band, in the order
NADiffusionDecoder.forward runs them, with two changes:
- Before every neighbourhood attention, the rows of the residual stream its window needs come from
  the ranks that own them (BandGather), and q, k, v are computed on those rows with the whole
  frame's RoPE positions (ComfyUI numbers positions from the tensor's first row, which for a band
  would be the band's first row; `_qkv` slices the whole frame's tables instead).
- The attention can run in runs of owned rows (plan.chunk_bytes), each on its window's rows only: a
  rank then never holds q, k, v and the output for its whole band, which is what bounds memory per
  GPU (ComfyUI holds all four for the whole frame). Every query still sees its own window, so the
  runs change nothing but the shapes the kernels see.
Noise: CausalDiffusionVAE.decode draws x_t for the whole batch in one torch.randn with a generator on
the VAE's device seeded 0. Each rank draws that same whole tensor the same way and keeps its band:
torch's generators fill a tensor in an order that depends on its size, so a band cannot be drawn on
its own. The transient is 3 values per output pixel, small next to the decoder's activations.
Batches: VAE.decode may split a batch into sub-batches when free memory is short, each seeded 0
again; this decodes the batch in one call, as VAE.decode does when it fits.
Import only in a rank, after bootstrap.import_comfyui.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist
from comfy.ldm.lightricks.vae import na_diffusion_decoder as na
from torch import nn

from ...strategies.na_bands import BandPlan, na_window, query_chunks, transfers
from ...strategies.vae_encode_plan import HEIGHT

CPU = torch.device("cpu")
# write(first frame, pixels [B, 3, t, rows, cols] in the VAE's dtype, on its device), as in
# vae_slab_decode.WriteFn.
WriteFn = Callable[[int, torch.Tensor], None]
# A unit boundary (NOTE [units] in workers/engine/units.py): collective, may raise to stop the decode.
UnitFn = Callable[[], None]
# Frames per q/k/v chunk as ComfyUI's NeighborhoodAttention3D sizes them (its 2 ** 25 elements).
QKV_CHUNK_ELEMENTS = 2**25


def is_diffusion_decoder(decoder: nn.Module) -> bool:
    return isinstance(decoder, na.NADiffusionDecoder)


def pixel_scale(decoder: nn.Module) -> int:
    """Output pixels per latent cell along either spatial axis (32 for LTX-2.5)."""
    return decoder.spatial_upscale


class BandGather:
    """Before an NA layer: a band's activation -> the rows its window needs, from whichever ranks own
    them (point-to-point, collective among the active ranks). comm_on_device: tensors travel as they
    are (NCCL); otherwise through CPU copies (gloo)."""

    def __init__(self, plan: BandPlan, rank: int, comm_on_device: bool) -> None:
        self.plan = plan
        self.rank = rank
        self.comm_on_device = comm_on_device
        self.seconds = 0.0
        self.bytes_sent = 0
        self.exchanges = 0

    def window(self, x: torch.Tensor, scale: int, kernel: int) -> tuple[torch.Tensor, int]:
        """x [B, T, H, W, C]: this rank's band at `scale` -> (rows [lo, hi) of the whole frame's tensor,
        lo). Returns x itself when nothing is missing."""
        plan, dim = self.plan, self.plan.dim
        start, stop = plan.band(self.rank, scale)
        lo, hi = na_window(plan.cells * scale, kernel, start, stop)
        moves = [m for m in transfers(plan, scale, kernel) if self.rank in (m.source, m.target)]
        if not moves:
            assert (lo, hi) == (start, stop), "the window reaches rows no rank sends: plans disagree"
            return x, lo
        began = time.perf_counter()
        device = x.device if self.comm_on_device else CPU
        ops, pieces = [], {}
        for move in moves:
            if move.source == self.rank:
                rows = x.narrow(dim, move.start - start, move.stop - move.start).to(device).contiguous()
                ops.append(dist.P2POp(dist.isend, rows, move.target))
                self.bytes_sent += rows.numel() * rows.element_size()
            elif move.target == self.rank:
                shape = list(x.shape)
                shape[dim] = move.stop - move.start
                pieces[move.start] = torch.empty(shape, dtype=x.dtype, device=device)
                ops.append(dist.P2POp(dist.irecv, pieces[move.start], move.source))
        for request in dist.batch_isend_irecv(ops) if ops else []:
            request.wait()
        pieces[start] = x
        out = torch.cat([pieces[first].to(x.device) for first in sorted(pieces)], dim=dim)
        assert out.shape[dim] == hi - lo, "the received rows do not tile the window: plans disagree"
        self.seconds += time.perf_counter() - began
        self.exchanges += 1
        return out, lo


class BandNADecoder:
    """One active rank's part of an exact diffusion decode (see the module docstring).

    vae: comfy.sd.VAE holding a CausalDiffusionVAE; plan: band_plan's; gather: this rank's BandGather;
    on_unit: the unit boundary before every block (`num_units` of them, alike on every active rank:
    NOTE [units] in workers/engine/units.py).
    """

    def __init__(
        self, vae, plan: BandPlan, rank: int, gather: BandGather, on_unit: UnitFn | None = None
    ) -> None:
        self.vae = vae
        self.model = vae.first_stage_model
        self.decoder = self.model.decoder
        self.plan = plan
        self.rank = rank
        self.gather = gather
        self.on_unit = on_unit
        self.units = 0

    @property
    def num_units(self) -> int:
        """Blocks one decode runs: every detail block, then every diffusion block of every step."""
        dec = self.decoder
        steps = dec.default_inference_timesteps.shape[0]
        return sum(len(blocks) for blocks in dec.det_stages) + steps * len(dec.diff_blocks)

    def _unit(self) -> None:
        self.units += 1
        if self.on_unit is not None:
            self.on_unit()

    def run(self, latent: torch.Tensor, write: WriteFn) -> None:
        """Decode this rank's band of `latent` [B, 128, F, h, w] (normalised, as LATENT holds it)."""
        box = [slice(None)] * 5
        box[self.plan.dim + 1] = slice(*self.plan.bands[self.rank])
        z = latent[tuple(box)].to(device=self.vae.device, dtype=self.vae.vae_dtype)
        z = self.model.per_channel_statistics.un_normalize(z)
        context, scale = self._context(z)
        del z
        write(0, self._denoise(context, scale, latent.shape[0]))

    # ----- stages 1-4 (NADiffusionDecoder.forward_pre_diffusion) -----

    def _context(self, z: torch.Tensor) -> tuple[torch.Tensor, int]:
        dec = self.decoder
        pad = dec.trailing_pad_latent_frames  # the whole clip is here: the last frame is always ours
        if pad > 0:
            z = torch.cat([z, z[:, :, -1:].expand(-1, -1, pad, -1, -1)], dim=2)
        x = dec.conv_in(z.permute(0, 2, 3, 4, 1))
        scale = 1
        for stage, blocks in enumerate(dec.det_stages):
            for block in blocks:
                self._unit()
                self._attend(block.attn, x, scale, block.norm1)
                x = block.mlp(x, pre=block.norm2, add_to=x)
            upsample = dec.upsamples[stage]
            x = upsample(x, drop_leading_frame=True)
            scale *= upsample.stride[self.plan.dim - 1]
        if pad > 0:
            x = x[:, : -(pad * dec.temporal_upscale)]
        return x, scale

    # ----- stage 5 (NADiffusionDecoder.forward and forward_diff_step) -----

    def _denoise(self, context: torch.Tensor, scale: int, batch: int) -> torch.Tensor:
        dec = self.decoder
        x_t = self._noise(context, scale, batch)
        timesteps = dec.default_inference_timesteps.to(context.device)
        steps = timesteps.shape[0]
        for i in range(steps):
            model_out = self._diff_step(context, x_t, timesteps[i].expand(batch), scale)
            if dec.model_output_type == "x0":
                if i == steps - 1:
                    return model_out
                velocity = (x_t.float() - model_out.float()) / timesteps[i]
            else:  # "v"
                velocity = model_out.float()
                if i == steps - 1:
                    return (x_t.float() - timesteps[i] * velocity).to(context.dtype)
            t_next = timesteps[i + 1] if i + 1 < steps else torch.zeros_like(timesteps[i])
            x_t = (x_t.float() - (timesteps[i] - t_next) * velocity).to(context.dtype)
        return x_t

    def _noise(self, context: torch.Tensor, scale: int, batch: int) -> torch.Tensor:
        """This band's rows of the x_t CausalDiffusionVAE.decode draws for the whole frame."""
        dec, plan = self.decoder, self.plan
        patch = dec.patch_size
        shape = [
            batch,
            dec.out_channels,
            context.shape[1],
            context.shape[2] * patch,
            context.shape[3] * patch,
        ]
        shape[plan.dim + 1] = plan.cells * scale * patch
        generator = torch.Generator(device=context.device)
        generator.manual_seed(0)
        whole = torch.randn(shape, dtype=context.dtype, device=context.device, generator=generator)
        start, stop = plan.band(self.rank, scale * patch)
        return whole.narrow(plan.dim + 1, start, stop - start).clone()

    def _diff_step(
        self, context: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor, scale: int
    ) -> torch.Tensor:
        dec = self.decoder
        x = na.patchify(x_t, patch_size_hw=dec.patch_size, patch_size_t=1)
        x = dec.conv_in_x_t(x.permute(0, 2, 3, 4, 1))
        modulation = dec.shared_adaln(dec.t_embedder(dec.timestep_scale_multiplier * t, dtype=x.dtype))
        for block in dec.diff_blocks:
            self._unit()
            x = self._diff_block(block, x, context, modulation, scale)
        x = dec.conv_out(dec.norm_out(x)).permute(0, 4, 1, 2, 3)
        return na.unpatchify(x, patch_size_hw=dec.patch_size, patch_size_t=1)

    def _diff_block(self, block, x, context, modulation, scale: int) -> torch.Tensor:
        """DiffusionNABlock.forward on the band."""
        table = block.scale_shift_table
        scale_msa, shift_msa, _, scale_mlp, shift_mlp, _, _ = [
            modulation[i] + table[i].view(1, 1, 1, 1, -1) for i in range(na.AdaLNZero.NUM_CHUNKS)
        ]
        chunk = max(1, na.MLP_TOKEN_CHUNK // max(x.shape[2] * x.shape[3], 1))
        for t0 in range(0, x.shape[1], chunk):
            x[:, t0 : t0 + chunk] += block.context_proj(context[:, t0 : t0 + chunk])
        self._attend(block.attn, x, scale, lambda s: na.modulate(block.norm1(s), scale_msa, shift_msa))
        return block.mlp(x, pre=lambda s: na.modulate(block.norm2(s), scale_mlp, shift_mlp), add_to=x)

    # ----- neighbourhood attention on a band -----

    def _attend(self, attn, x: torch.Tensor, scale: int, pre) -> None:
        """x += attn(pre(x)) for this rank's band x [B, T, H, W, C] (NeighborhoodAttention3D.forward
        with add_to=x), in runs of owned rows (module docstring)."""
        plan, dim = self.plan, self.plan.dim
        kernel = attn.kernel_size[dim - 1]
        length = plan.cells * scale
        rows_in, lo = self.gather.window(x, scale, kernel)
        whole = list(x.shape[1:4])
        whole[dim - 1] = length
        inv_freqs = tuple(na.rope_inv_freqs(d, attn.rope_base, device=x.device) for d in attn.rope_split)
        tables = na._rope_tables(tuple(whole), inv_freqs, x.device)
        across = x.shape[5 - dim]  # the spatial axis not cut
        row_bytes = x.shape[0] * x.shape[1] * across * attn.dim * x.element_size()
        runs = query_chunks(plan, self.rank, scale, kernel, row_bytes)
        if len(runs) > 1 and rows_in is x:  # a later run's window reads rows an earlier run updated
            rows_in = x.clone()
        start = plan.band(self.rank, scale)[0]
        for first, stop in runs:
            k_lo, k_hi = na_window(length, kernel, first, stop)
            out = self._na(attn, rows_in.narrow(dim, k_lo - lo, k_hi - k_lo), pre, tables, k_lo, k_hi)
            out = out.narrow(dim, first - k_lo, stop - first)
            target = x.narrow(dim, first - start, stop - first)
            chunk = max(1, QKV_CHUNK_ELEMENTS // max(out.shape[2] * out.shape[3] * attn.dim, 1))
            for t0 in range(0, out.shape[1], chunk):
                target[:, t0 : t0 + chunk] += attn.proj(out[:, t0 : t0 + chunk])
            del out

    def _na(self, attn, rows: torch.Tensor, pre, tables, k_lo: int, k_hi: int) -> torch.Tensor:
        """NA over `rows` (the window's grid, rows [k_lo, k_hi) of the whole frame): [B, T, h, w, C]."""
        batch, t, h, w, _ = rows.shape
        axis_table = 1 if self.plan.axis == HEIGHT else 2
        tables = list(tables)
        tables[axis_table] = tuple(part[k_lo:k_hi] for part in tables[axis_table])
        shape = (batch, t, h, w, attn.num_heads, attn.head_dim)
        q, k, v = (torch.empty(shape, dtype=rows.dtype, device=rows.device) for _ in range(3))
        q_weight = (attn.q_norm.weight.detach() * attn.scale).to(rows.dtype)
        k_weight = attn.k_norm.weight.detach().to(rows.dtype)
        chunk = max(1, QKV_CHUNK_ELEMENTS // max(h * w * attn.dim, 1))
        for t0 in range(0, t, chunk):
            t1 = min(t0 + chunk, t)
            qc, kc, vc = attn.qkv(pre(rows[:, t0:t1])).chunk(3, dim=-1)
            part = (batch, t1 - t0, h, w, attn.num_heads, attn.head_dim)
            q[:, t0:t1], k[:, t0:t1], v[:, t0:t1] = qc.reshape(part), kc.reshape(part), vc.reshape(part)
            freqs = na._rope_matrices_slice(tables, t0, t1, h, w)
            tokens = (t1 - t0) * h * w
            for b in range(batch):
                na.comfy_kitchen.rms_rope_(
                    q[b, t0:t1].view(1, tokens, attn.num_heads, attn.head_dim),
                    k[b, t0:t1].view(1, tokens, attn.num_heads, attn.head_dim),
                    freqs,
                    q_weight,
                    k_weight,
                )
        out = na.comfy_kitchen.na3d(q, k, v, list(attn.kernel_size), None, 1.0)
        del q, k, v
        return out.reshape(batch, t, h, w, attn.dim)
