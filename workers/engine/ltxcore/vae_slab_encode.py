"""Run ltx-core's VideoEncoder on one rank's slab, chunk by chunk, swapping edge rows with neighbours
(strategies/halo_exchange.py).

Collective among the active ranks (NOTE [encode slabs] in strategies/vae_encode_plan.py): every active rank
calls `SlabEncoder.encode_chunk` for the same chunks in the same order; inside, each convolution
exchanges its edge rows with the neighbouring slabs (point-to-point, neighbours only). While the
encoder runs, its CausalConv3d and SpaceToDepthDownsample modules are routed through this module
(`SlabEncoder` is a context manager; the modules are restored on exit):

- CausalConv3d: the slab gets `k // 2` rows from each neighbour (zeros at the frame's real edges,
  which is the zero padding the whole-frame convolution applies there); in time, the last `k_t - 1`
  frames of the previous chunk (NOTE [encode chunks]), or, in chunk 0, frame 0 repeated, as ltx-core
  pads; then the convolution without padding along the slab axis. The weights are ltx-core's.
- SpaceToDepthDownsample: ltx-core's computation, except that frame 0 is repeated before a temporal
  stride in chunk 0 only.
Everything else (res blocks, norms, the latent statistics) is ltx-core's own forward.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from einops import rearrange
from ltx_core.model.video_vae.convolution import CausalConv3d
from ltx_core.model.video_vae.enums import LogVarianceType
from ltx_core.model.video_vae.ops import patchify
from ltx_core.model.video_vae.sampling import SpaceToDepthDownsample

from ...strategies.halo_exchange import HaloExchange
from ...strategies.vae_tiles import FRAMES_PER_CELL, PIXELS_PER_CELL
from .encoder_reach import encoder_reach


def unsupported_reason(encoder: torch.nn.Module) -> str | None:
    """Why `encoder` cannot run in slabs and chunks, or None: it must be local (encoder_reach.py),
    with LTX-2's cell of 8 frames x 32 x 32 px (the plan's unit) and stride-1 zero-padded convolutions
    (downsampling by space-to-depth only), as LTX-2's encoder is."""
    reach = encoder_reach(encoder)
    if reach is None:
        return "its layers are not all local (a norm over whole frames, or a block this pack does not know)"
    if (reach.pixels_per_cell, reach.frames_per_cell) != (PIXELS_PER_CELL, FRAMES_PER_CELL):
        return (
            f"a latent cell stands for {reach.pixels_per_cell} px and {reach.frames_per_cell} frames, not "
            f"LTX-2's {PIXELS_PER_CELL} px and {FRAMES_PER_CELL} frames"
        )
    for name, module in encoder.named_modules():
        if isinstance(module, CausalConv3d) and (
            tuple(module.conv.stride) != (1, 1, 1) or module.conv.padding_mode != "zeros"
        ):
            return (
                f"convolution {name} has stride {module.conv.stride} and {module.conv.padding_mode} padding"
            )
    return None


def _encoder_means(encoder: torch.nn.Module, sample: torch.Tensor) -> torch.Tensor:
    """The latent means of conv_out's output, as VideoEncoder.forward takes them: with one shared
    log-variance channel (uniform, constant) all but the last channel, otherwise the first half."""
    if encoder.latent_log_var in {LogVarianceType.UNIFORM, LogVarianceType.CONSTANT}:
        return sample[:, :-1]
    return torch.chunk(sample, 2, dim=1)[0]


class SlabEncoder:
    """One rank's part of a distributed encode (collective among the active ranks; see the module
    docstring). Use as a context manager around the chunks of one encode, in order."""

    def __init__(self, encoder: torch.nn.Module, exchange: HaloExchange, streaming: bool) -> None:
        self.encoder = encoder
        self.exchange = exchange
        self.streaming = streaming  # more than one chunk: convolutions keep their last frames
        self.first_chunk = True
        self._caches: dict[int, torch.Tensor] = {}
        self._patched: list[torch.nn.Module] = []

    def __enter__(self) -> SlabEncoder:
        for module in self.encoder.modules():
            if isinstance(module, CausalConv3d):
                module.forward = self._conv_forward(module)
            elif isinstance(module, SpaceToDepthDownsample):
                module.forward = self._downsample_forward(module)
            else:
                continue
            self._patched.append(module)
        return self

    def __exit__(self, *exc: object) -> None:
        for module in self._patched:
            del module.forward  # the class's forward again
        self._patched.clear()
        self._caches.clear()

    def encode_chunk(self, pixels: torch.Tensor) -> torch.Tensor:
        """pixels [B, 3, frames, h, w] in [-1, 1] (the encoder's dtype and device) -> this chunk's
        normalised latent means for this slab [B, 128, latent frames, h/32, w/32]. VideoEncoder.forward
        minus its frame-count crop (the plan's chunks are whole)."""
        encoder = self.encoder
        sample = patchify(pixels, patch_size_hw=encoder.patch_size, patch_size_t=1)
        sample = encoder.conv_in(sample)
        for block in encoder.down_blocks:
            sample = block(sample)
        sample = encoder.conv_out(encoder.conv_act(encoder.conv_norm_out(sample)))
        self.first_chunk = False
        return encoder.per_channel_statistics.normalize(_encoder_means(encoder, sample))

    def _conv_forward(self, module: CausalConv3d) -> Callable[..., torch.Tensor]:
        conv = module.conv
        dim = self.exchange.dim
        rows = conv.kernel_size[dim - 2] // 2
        padding = list(conv.padding)
        padding[dim - 2] = 0  # the slab axis is padded by the exchange
        lookback = module.time_kernel_size - 1

        def forward(x: torch.Tensor, causal: bool = True) -> torch.Tensor:
            if not causal:
                raise RuntimeError("the distributed encode runs the encoder causally, as ltx-core does")
            x = self.exchange.pad(x, rows)
            if lookback:
                cached = self._caches.get(id(module))
                front = x[:, :, :1].repeat(1, 1, lookback, 1, 1) if cached is None else cached
                x = torch.cat((front, x), dim=2)
                if self.streaming:  # a copy: a view would keep the whole chunk's input alive
                    self._caches[id(module)] = x[:, :, -lookback:].clone()
            return F.conv3d(
                x, conv.weight, conv.bias, conv.stride, tuple(padding), conv.dilation, conv.groups
            )

        return forward

    def _downsample_forward(self, module: SpaceToDepthDownsample) -> Callable[..., torch.Tensor]:
        st, sh, sw = module.stride

        def forward(x: torch.Tensor, causal: bool = True) -> torch.Tensor:
            if st == 2 and self.first_chunk:
                x = torch.cat([x[:, :, :1], x], dim=2)  # frame 0 stands alone, as in ltx-core
            pattern = "b c (d p1) (h p2) (w p3) -> b (c p1 p2 p3) d h w"
            skip = rearrange(x, pattern, p1=st, p2=sh, p3=sw)
            skip = rearrange(skip, "b (c g) d h w -> b c g d h w", g=module.group_size).mean(dim=2)
            out = rearrange(module.conv(x, causal=causal), pattern, p1=st, p2=sh, p3=sw)
            return out + skip

        return forward
