"""How far LTX-2's video encoder looks: the receptive field of one latent cell, read off the module tree.

NOTE [encoder reach]: ltx-core's VideoEncoder is local. Every layer is a convolution (3x3x3, causal in
time: frames before a position only, zero-padded in space), a per-position norm (PixelNorm), a
pointwise activation, or a space-to-depth rearrangement; none mixes values over a whole frame or
clip. So a latent cell depends only on a finite box of input: its own 8 frames x 32 x 32 pixels,
plus `spatial_px` pixels on each side and `temporal_frames` frames before it (none after: causal).
A tile that reads that much context around the cells it keeps computes them from exactly the inputs
the whole-clip encode uses (the tile's zero padding and first-frame repeats lie outside their reach).

The walk follows VideoEncoder.forward: patchify, conv_in, the down blocks, norm, conv_out. Each axis
tracks the size of one cell of the current level in input pixels (or frames) and the reach so far;
a convolution of kernel k at that level adds its one-sided extent times the cell size. A module the
walk does not know, or one that normalises over a whole frame (GroupNorm), makes the reach unknown
(None): then no finite context makes tiles exact.
"""

from __future__ import annotations

from dataclasses import dataclass

from ltx_core.model.common.normalization import PixelNorm
from ltx_core.model.video_vae.convolution import CausalConv3d
from ltx_core.model.video_vae.resnet import ResnetBlock3D, UNetMidBlock3D
from ltx_core.model.video_vae.sampling import SpaceToDepthDownsample
from torch import nn


@dataclass(frozen=True)
class EncoderReach:
    """The receptive field of one latent cell beyond its own pixels.

    spatial_px: input pixels on each side (height and width alike) that can change the cell.
    temporal_frames: input frames before the cell's first frame that can change it (causal).
    pixels_per_cell / frames_per_cell: the cell's own extent (32 px and 8 frames for LTX-2).
    """

    spatial_px: int
    temporal_frames: int
    pixels_per_cell: int = 32
    frames_per_cell: int = 8


@dataclass
class _Axis:
    cell: int = 1  # one position of the current level, in input pixels (or frames)
    before: int = 0  # reach before the cell, in input pixels (or frames)
    after: int = 0  # reach after the cell


class _NotLocal(Exception):
    """A layer mixes values over a whole frame, or is unknown to the walk."""


def _conv(module: CausalConv3d, time: _Axis, space: _Axis) -> None:
    conv = module.conv
    (kt, kh, kw), (st, sh, sw) = conv.kernel_size, conv.stride
    if kh != kw or sh != sw or conv.dilation[1:] != (1, 1) or conv.padding[1] != kh // 2:
        raise _NotLocal(f"unexpected convolution {conv}")
    # Time: causal padding of (kt - 1) * dilation repeated first frames; output j reads input
    # [st*j - (kt-1)*d, st*j] and stands for the st input positions ending at st*j.
    time.before += ((kt - 1) * conv.dilation[0] - (st - 1)) * time.cell
    time.cell *= st
    # Space: symmetric zero padding kh // 2; output i reads [sh*i - p, sh*i - p + kh - 1] and stands for
    # the sh positions starting at sh*i.
    pad = kh // 2
    space.before += pad * space.cell
    space.after += (kh - 1 - pad - (sh - 1)) * space.cell
    space.cell *= sh


def _norm(module: nn.Module) -> None:
    if not isinstance(module, PixelNorm | nn.Identity):
        raise _NotLocal(f"{type(module).__name__} normalises over more than one position")


def _resnet(block: ResnetBlock3D, time: _Axis, space: _Axis) -> None:
    if block.inject_noise or block.timestep_conditioning:
        raise _NotLocal("noise injection or timestep conditioning in an encoder block")
    _norm(block.norm1)
    _conv(block.conv1, time, space)
    _norm(block.norm2)
    _conv(block.conv2, time, space)
    _norm(block.norm3)  # shortcut side: a 1x1x1 convolution (or none) adds no reach


def _walk(module: nn.Module, time: _Axis, space: _Axis) -> None:
    if isinstance(module, UNetMidBlock3D):
        for block in module.res_blocks:
            _walk(block, time, space)
    elif isinstance(module, ResnetBlock3D):
        _resnet(module, time, space)
    elif isinstance(module, SpaceToDepthDownsample):
        # The convolution runs before the rearrangement (at the finer level); in time, a stride of 2
        # first repeats frame 0, so new cell j stands for old positions 2j-1 and 2j (no extra reach).
        _conv(module.conv, time, space)
        st, sh, sw = module.stride
        if sh != sw:
            raise _NotLocal(f"unequal spatial strides {module.stride}")
        time.cell *= st
        space.cell *= sh
    elif isinstance(module, CausalConv3d):
        _conv(module, time, space)
    else:
        raise _NotLocal(f"unknown encoder block {type(module).__name__}")


def encoder_reach(encoder: nn.Module) -> EncoderReach | None:
    """The reach of ltx-core's VideoEncoder `encoder` (NOTE [encoder reach]); None when it is not local."""
    time, space = _Axis(), _Axis(cell=encoder.patch_size)
    try:
        _conv(encoder.conv_in, time, space)
        for block in encoder.down_blocks:
            _walk(block, time, space)
        _norm(encoder.conv_norm_out)
        _conv(encoder.conv_out, time, space)
    except _NotLocal:
        return None
    return EncoderReach(
        spatial_px=max(space.before, space.after),
        temporal_frames=time.before,
        pixels_per_cell=space.cell,
        frames_per_cell=time.cell,
    )
