"""LTX-2's fixed numbers, defined once for the UI side, the ranks and the engines.

What a released LTX-2 checkpoint's VAEs make (ltx-core 1.0.0 and ComfyUI's comfy/ldm/lightricks
agree on every value here); a checkpoint whose config says otherwise is described by
`model_files.describe_config`, which reads the numbers that vary from the file itself.
"""

from __future__ import annotations

# Video VAE: one latent cell is 32 x 32 pixels and 8 frames (the first latent frame is one pixel
# frame: frames = 8 (F - 1) + 1).
VIDEO_PIXELS_PER_CELL = 32
VIDEO_FRAMES_PER_CELL = 8
VIDEO_LATENT_CHANNELS = 128

# Audio VAE: latents [B, 8, T, 16]; one latent frame is 4 mel frames; 16 kHz audio, hop 160, so
# 25 latent frames per second.
AUDIO_LATENT_CHANNELS = 8
AUDIO_LATENT_MEL_BINS = 16
AUDIO_LATENT_DOWNSAMPLE = 4
AUDIO_SAMPLE_RATE_HZ = 16000
AUDIO_HOP_LENGTH = 160

# LTXVConditioning's default frame rate, used when a CONDITIONING carries none.
DEFAULT_FRAME_RATE = 25.0

# Upper bound on video tokens in one forward. Lightricks ships 32,768 (1088x1920x121 is 32,640
# tokens); beyond it memory for attention activations dominates.
DEFAULT_MAX_VIDEO_TOKENS = 32768
