"""ComfyUI latent tensors <-> transformer tokens, and the token positions the model sees.

Video latent [B, 128, F, H, W] (ComfyUI's LATENT "samples", already normalised by the VAE statistics)
becomes tokens [B, F*H*W, 128] in (frame, row, column) order, patch size 1. Audio latent
[B, 8, T, 16] becomes tokens [B, T, 128] (channels x mel bins per token).

Positions are [start, end) intervals, [B, 3, T, 2] for video (time in seconds, then pixel rows and
columns) and [B, 1, T, 2] for audio (seconds), computed the way native ComfyUI computes them for
LTX-2 (see docs/COMFYUI_LTX2_PARITY.md): latent cells scaled by the VAE factors (8 in time, 32 in
space), the first frame's causal shift, time divided by the frame rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.types import AudioLatentShape, SpatioTemporalScaleFactors, VideoLatentShape

from ...wire.constants import (
    AUDIO_HOP_LENGTH,
    AUDIO_LATENT_DOWNSAMPLE,
    AUDIO_SAMPLE_RATE_HZ,
    VIDEO_LATENT_CHANNELS,
)

# VAE compression of LTX-2: 8 frames and 32x32 pixels per latent cell (wire/constants.py).
VIDEO_SCALE = SpatioTemporalScaleFactors.default()


@dataclass(frozen=True)
class AudioTiming:
    """How audio latent frames map to seconds: 16 kHz, hop 160, 4 mel frames per latent frame
    -> 25 latent frames per second. Values from the checkpoint's audio VAE config win."""

    sample_rate: int = AUDIO_SAMPLE_RATE_HZ
    hop_length: int = AUDIO_HOP_LENGTH
    latent_downsample: int = AUDIO_LATENT_DOWNSAMPLE
    is_causal: bool = True

    @property
    def latent_frames_per_second(self) -> float:
        return self.sample_rate / (self.hop_length * self.latent_downsample)


_VIDEO_PATCHIFIER = VideoLatentPatchifier(patch_size=1)


def video_to_tokens(latent: torch.Tensor) -> torch.Tensor:
    """[B, C, F, H, W] -> [B, F*H*W, C]."""
    return _VIDEO_PATCHIFIER.patchify(latent)


def tokens_to_video(tokens: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """[B, F*H*W, C] -> [B, C, F, H, W] for the given 5-d shape."""
    return _VIDEO_PATCHIFIER.unpatchify(tokens, VideoLatentShape(*shape))


def audio_to_tokens(latent: torch.Tensor) -> torch.Tensor:
    """[B, C, T, M] -> [B, T, C*M]."""
    b, c, t, m = latent.shape
    return latent.permute(0, 2, 1, 3).reshape(b, t, c * m)


def tokens_to_audio(tokens: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """[B, T, C*M] -> [B, C, T, M]."""
    b, c, t, m = shape
    return tokens.reshape(b, t, c, m).permute(0, 2, 1, 3).contiguous()


def video_mask_to_tokens(
    mask: torch.Tensor | None, shape: torch.Size | tuple[int, ...]
) -> torch.Tensor | None:
    """A ComfyUI noise_mask broadcastable to [B, 1, F, H, W] -> per-token values [B, F*H*W]."""
    if mask is None:
        return None
    b, _, f, h, w = shape
    full = mask.to(torch.float32).expand(b, 1, f, h, w) if mask.dim() == 5 else _resize_mask(mask, b, f, h, w)
    return video_to_tokens(full.contiguous())[..., 0]


def _resize_mask(mask: torch.Tensor, b: int, f: int, h: int, w: int) -> torch.Tensor:
    # 3-d/4-d masks ([B, H, W] / [B, F, H, W] in latent cells) as some native nodes produce them.
    m = mask.to(torch.float32)
    while m.dim() < 5:
        m = m.unsqueeze(1)
    return m.expand(b, 1, f, h, w)


def video_positions(
    shape: torch.Size | tuple[int, ...],
    frame_rate: float,
    *,
    causal_fix: bool = True,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Token positions [B, 3, F*H*W, 2]: [start, end) in (seconds, pixel row, pixel column), float32.

    As ComfyUI computes them: integer pixel coordinates (latent cells x 8 / 32 / 32), the causal shift
    t -> max(0, t - 7) when the checkpoint asks for it, then time multiplied by (1 / frame_rate) in
    float32 (a multiply, not a divide: the two differ in the last bit for a third of the values).
    """
    b, _, f, h, w = shape
    grid = _VIDEO_PATCHIFIER.get_patch_grid_bounds(
        VideoLatentShape(b, VIDEO_LATENT_CHANNELS, f, h, w), device=device
    )
    scale = torch.tensor(VIDEO_SCALE, dtype=grid.dtype, device=grid.device).view(1, 3, 1, 1)
    pixel = grid * scale
    if causal_fix:
        pixel[:, 0] = (pixel[:, 0] + 1 - VIDEO_SCALE.time).clamp(min=0)
    positions = pixel.to(torch.float32)
    positions[:, 0] = positions[:, 0] * (1.0 / frame_rate)
    return positions


def audio_positions(
    shape: torch.Size | tuple[int, ...],
    timing: AudioTiming = AudioTiming(),
    device: torch.device | None = None,
) -> torch.Tensor:
    """Token positions [B, 1, T, 2] in seconds, float32."""
    b, c, t, m = shape
    patchifier = AudioPatchifier(
        patch_size=1,
        sample_rate=timing.sample_rate,
        hop_length=timing.hop_length,
        audio_latent_downsample_factor=timing.latent_downsample,
        is_causal=timing.is_causal,
    )
    return patchifier.get_patch_grid_bounds(AudioLatentShape(b, c, t, m), device=device)
