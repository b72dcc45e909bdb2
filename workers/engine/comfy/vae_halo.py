"""ComfyUI's LTX-2 video VAE run on one rank's slab of the frame, edge rows swapped with the neighbours.

NOTE [comfy vae slabs]: the frame is cut into slabs along its longer axis (EncodePlan's slabs, NOTE
[encode slabs] in vae_encode_plan.py), and each rank runs ComfyUI's own encoder or decoder modules on
its slab. Every spatial convolution of those modules is a CausalConv3d (comfy/ldm/lightricks/vae/
causal_conv3d.py): it pads time itself (causally, with its own cache across time chunks) and then
calls its inner Conv3d, which pads space (zeros, or by reflection in LTX-2's decoder). While a
`SlabConvolutions` is active, that inner Conv3d instead takes `k // 2` rows from each neighbouring
slab (HaloExchange), pads only the frame's real edges the way the Conv3d would, and convolves without
padding. Everything else is per position (PixelNorm, LayerNorm over channels, activations, the
depth-to-space and space-to-depth rearrangements, 1x1x1 shortcuts), so each rank computes exactly the
values the whole-frame run computes for its rows, from the same inputs.

`unsupported_reason` refuses what would break that: norms over whole frames (GroupNorm), noise drawn
per frame (inject_noise, timestep conditioning), strided or dilated spatial convolutions, and modules
this walk does not know. Import only in a rank, after bootstrap.import_comfyui.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
import torch.nn.functional as F
from comfy.ldm.lightricks.vae import causal_video_autoencoder as cva
from comfy.ldm.lightricks.vae.causal_conv3d import CausalConv3d
from comfy.ldm.lightricks.vae.pixel_norm import PixelNorm
from torch import nn

from ...strategies.halo_exchange import HaloExchange

# A unit boundary (NOTE [units] in workers/engine/units.py): collective, may raise to stop the walk.
UnitFn = Callable[[], None]

ZEROS = "zeros"
# torch's Conv3d padding modes that a slab can reproduce at the frame's real edges with F.pad.
EDGE_MODES = {ZEROS: "constant", "reflect": "reflect", "replicate": "replicate"}
# Modules that act on each position alone (or hold others); anything else is refused.
_LOCAL = (
    cva.Encoder,
    cva.Decoder,
    cva.UNetMidBlock3D,
    cva.ResnetBlock3D,
    cva.DepthToSpaceUpsample,
    cva.SpaceToDepthDownsample,
    cva.LayerNorm,
    CausalConv3d,
    PixelNorm,
    nn.ModuleList,
    nn.SiLU,
    nn.Identity,
    nn.Dropout,
    nn.LayerNorm,
)


def _pad_spec(dim: int, before: int, after: int) -> tuple[int, ...]:
    """F.pad's argument padding axis `dim` (3: height, 4: width) of a [B, C, F, H, W] tensor."""
    return (before, after, 0, 0, 0, 0) if dim == 4 else (0, 0, before, after, 0, 0)


def _conv_reason(name: str, conv: nn.Conv3d) -> str | None:
    kh, kw = conv.kernel_size[1:]
    if (
        tuple(conv.stride[1:]) != (1, 1)
        or tuple(conv.dilation[1:]) != (1, 1)
        or kh % 2 == 0
        or tuple(conv.padding[1:]) != (kh // 2, kw // 2)
        or conv.padding_mode not in EDGE_MODES
    ):
        return (
            f"convolution {name} has stride {conv.stride}, dilation {conv.dilation}, padding {conv.padding} "
            f"({conv.padding_mode})"
        )
    return None


def unsupported_reason(root: nn.Module) -> str | None:
    """Why ComfyUI's Encoder or Decoder `root` cannot run in slabs (NOTE [comfy vae slabs]), or None."""
    if getattr(root, "timestep_conditioning", False):
        return "the decoder is timestep-conditioned and mixes noise drawn for the whole latent into it"
    for name, module in root.named_modules():
        if isinstance(module, cva.ResnetBlock3D) and module.inject_noise:
            return f"{name} adds noise drawn per frame (inject_noise)"
        if isinstance(module, CausalConv3d):
            reason = _conv_reason(name, module.conv)
            if reason is not None:
                return reason
        elif isinstance(module, nn.Conv3d):
            if name.endswith(".conv") and isinstance(
                root.get_submodule(name.rsplit(".", 1)[0]), CausalConv3d
            ):
                continue
            if tuple(module.kernel_size) != (1, 1, 1):
                return f"{name} is a {tuple(module.kernel_size)} convolution outside a CausalConv3d"
        elif isinstance(module, nn.GroupNorm):
            return f"{name} is a GroupNorm: it normalises over whole frames"
        elif not isinstance(module, _LOCAL):
            return f"{name} is a {type(module).__name__}, which the slab split does not know"
    return None


class SlabConvolutions:
    """Context manager: while active, the inner Conv3d of every CausalConv3d under `root` convolves this
    rank's slab with its neighbours' edge rows (NOTE [comfy vae slabs]). Collective with the
    neighbours at every convolution: all active ranks must run the same modules on the same time
    chunks in the same order. The modules are restored on exit.

    on_unit: called before every convolution's exchange, the same number of times on every active
    rank: the boundary where the ranks agree on cancel (NOTE [units] in workers/engine/units.py)."""

    def __init__(self, root: nn.Module, exchange: HaloExchange, on_unit: UnitFn | None = None) -> None:
        self.root = root
        self.exchange = exchange
        self.on_unit = on_unit
        self._patched: list[nn.Conv3d] = []

    def __enter__(self) -> SlabConvolutions:
        for module in self.root.modules():
            if isinstance(module, CausalConv3d):
                module.conv.forward = self._forward(module.conv)  # an instance attribute shadows the class's
                self._patched.append(module.conv)
        return self

    def __exit__(self, *exc: object) -> None:
        for conv in self._patched:
            del conv.forward
        self._patched.clear()

    def pad_slab(self, x: torch.Tensor, rows: int, mode: str) -> torch.Tensor:
        """x [B, C, F, h, w] -> x with `rows` neighbour rows on both sides of the slab axis, and at the
        frame's real edges the padding the whole-frame Conv3d applies there (`mode`)."""
        dim = self.exchange.dim
        padded = self.exchange.pad(x, rows)  # zeros at the frame's real edges
        before = rows if self.exchange.before is None else 0
        after = rows if self.exchange.after is None else 0
        if mode == ZEROS or not (before or after):
            return padded
        core = padded.narrow(dim, before, padded.shape[dim] - before - after)
        return F.pad(core, _pad_spec(dim, before, after), mode=EDGE_MODES[mode])

    def _forward(self, conv: nn.Conv3d) -> Callable[[torch.Tensor], torch.Tensor]:
        dim = self.exchange.dim
        other = 7 - dim  # the spatial axis that is not cut
        rows, across = conv.padding[dim - 2], conv.padding[other - 2]
        mode = conv.padding_mode

        def forward(x: torch.Tensor) -> torch.Tensor:
            if self.on_unit is not None:
                self.on_unit()
            x = self.pad_slab(x, rows, mode)
            if across and mode != ZEROS:
                x = F.pad(x, _pad_spec(other, across, across), mode=EDGE_MODES[mode])
            padding = [0, 0, 0]
            if mode == ZEROS:
                padding[other - 2] = across
            # The VAE's weights sit on its device in its dtype (comfy.sd.VAE, no offload in a rank):
            # these casts are no-ops there and only guard a caller that moved the input.
            weight = conv.weight.to(device=x.device, dtype=x.dtype)
            bias = None if conv.bias is None else conv.bias.to(device=x.device, dtype=x.dtype)
            return F.conv3d(x, weight, bias, conv.stride, tuple(padding), conv.dilation, conv.groups)

        return forward


def clear_temporal_caches(root: nn.Module) -> None:
    """Drop this thread's time caches in `root`, as ComfyUI's Encoder/Decoder.forward do on the way out."""
    tid = threading.get_ident()
    for module in root.modules():
        cache = getattr(module, "temporal_cache_state", None)
        if isinstance(cache, dict):
            cache.pop(tid, None)
