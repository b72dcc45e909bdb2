"""Shapes of what the Distributed VAE Decode returns, known before any worker runs.

The node allocates its IMAGE and AUDIO tensors in shared memory before the job (workers write into
them), so both shapes are computed here from the latent's shape and the checkpoint's config alone:
IMAGE [B * frames, H, W, 3] float32 (ComfyUI's layout; frames = 8(F-1)+1, H = 32h, W = 32w) and the
waveform [B, channels, samples] float32. Workers check the waveform they decode against this
length, so a config this module reads wrongly fails loudly instead of writing a short clip.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .constants import (
    AUDIO_HOP_LENGTH,
    AUDIO_LATENT_DOWNSAMPLE,
    AUDIO_SAMPLE_RATE_HZ,
    VIDEO_FRAMES_PER_CELL,
    VIDEO_LATENT_CHANNELS,
    VIDEO_PIXELS_PER_CELL,
)
from .file_metadata import config_section, nested

# The vocoder (ComfyUI's comfy/ldm/lightricks/vocoders/vocoder.py Vocoder, as ltx-core's): conv_pre and
# conv_post are kernel 7 with padding 3 (length kept); each upsample is ConvTranspose1d(kernel k,
# stride s, padding (k - s) // 2). Defaults when the config omits them are ComfyUI's (what runs;
# ltx-core's differ: 6, 5, 2, 2, 2 and 16, 15, 8, 4, 4).
DEFAULT_UPSAMPLE_RATES = (5, 4, 2, 2, 2)
DEFAULT_UPSAMPLE_KERNELS = (16, 16, 8, 4, 4)
DEFAULT_AUDIO_CHANNELS = 2  # stereo


def image_shape(video_shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """IMAGE shape [B * frames, H, W, 3] for a video latent [B, C, F, h, w]."""
    b, _, f, h, w = video_shape
    return (
        b * (1 + (f - 1) * VIDEO_FRAMES_PER_CELL),
        h * VIDEO_PIXELS_PER_CELL,
        w * VIDEO_PIXELS_PER_CELL,
        3,
    )


def encoded_latent_shape(pixels_shape: tuple[int, ...]) -> tuple[int, int, int, int, int]:
    """The latent [1, 128, F, h, w] of IMAGE frames [frames, H, W, C] (frames = 8(F-1)+1, H = 32h)."""
    frames, height, width = pixels_shape[:3]
    return (
        1,
        VIDEO_LATENT_CHANNELS,
        (frames - 1) // VIDEO_FRAMES_PER_CELL + 1,
        height // VIDEO_PIXELS_PER_CELL,
        width // VIDEO_PIXELS_PER_CELL,
    )


@dataclass(frozen=True)
class AudioOutput:
    """The decoded waveform of an audio latent [B, 8, T, 16]: [B, channels, samples] at sample_rate Hz."""

    channels: int
    samples: int
    sample_rate: int

    def shape(self, batch: int) -> tuple[int, int, int]:
        return (batch, self.channels, self.samples)


def mel_frames(latent_frames: int, causal: bool) -> int:
    """Mel frames the audio decoder makes of T latent frames: 4T, or 4T - 3 when causal (its first
    latent frame stands for one mel frame); ltx-core AudioDecoder._denormalize_latents."""
    frames = latent_frames * AUDIO_LATENT_DOWNSAMPLE
    return max(frames - (AUDIO_LATENT_DOWNSAMPLE - 1), 1) if causal else frames


def _generator_length(mel: int, section: Mapping[str, Any]) -> int:
    rates = _ints(section.get("upsample_rates"), DEFAULT_UPSAMPLE_RATES)
    kernels = _ints(section.get("upsample_kernel_sizes"), DEFAULT_UPSAMPLE_KERNELS)
    length = mel
    for stride, kernel in zip(rates, kernels):
        length = (length - 1) * stride - 2 * ((kernel - stride) // 2) + kernel
    return length


def _ints(value: object, default: tuple[int, ...]) -> tuple[int, ...]:
    if isinstance(value, list | tuple) and value and all(isinstance(v, int) for v in value):
        return tuple(value)
    return default


def audio_output(config: Mapping[str, Any], latent_frames: int) -> AudioOutput:
    """The waveform of `latent_frames` audio latent frames, from the config of a full checkpoint or an
    audio VAE file ("audio_vae" and "vocoder" sections, as ComfyUI's AudioVAE reads them)."""
    audio_vae = config_section(config, "audio_vae")
    ddconfig = nested(audio_vae, "model", "params", "ddconfig")
    causal = ddconfig.get("causality_axis", "height") != "none"  # the autoencoder's default
    channels = int(ddconfig.get("out_ch", DEFAULT_AUDIO_CHANNELS))
    vocoder = config_section(config, "vocoder")
    mel = mel_frames(latent_frames, causal)
    bwe = nested(vocoder, "bwe")
    if "bwe" not in vocoder:
        # ComfyUI's AudioVAE.output_sample_rate: the config's, else sample rate x upsampling / hop.
        rates = _ints(vocoder.get("upsample_rates"), DEFAULT_UPSAMPLE_RATES)
        params = nested(audio_vae, "model", "params")
        hop = nested(audio_vae, "preprocessing", "stft").get("hop_length", AUDIO_HOP_LENGTH)
        upsampling = 1
        for rate in rates:
            upsampling *= rate
        inferred = int(params.get("sampling_rate", AUDIO_SAMPLE_RATE_HZ)) * upsampling // int(hop)
        return AudioOutput(
            channels, _generator_length(mel, vocoder), int(vocoder.get("output_sample_rate") or inferred)
        )
    # VocoderWithBWE (the 48 kHz vocoder of LTX-2.3, and of later files that keep it): the base vocoder
    # runs at the BWE's input rate, and the output is that length times output / input rate
    # (ComfyUI's VocoderWithBWE.forward).
    base = _generator_length(mel, nested(vocoder, "vocoder"))
    rate_in, rate_out = int(bwe["input_sampling_rate"]), int(bwe["output_sampling_rate"])
    return AudioOutput(channels, base * rate_out // rate_in, rate_out)
