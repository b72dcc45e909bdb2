"""The tiny LTX-2.5 VAE files: the video VAE with its diffusion decoder (as released) or with the
conv decoder (the option LTX-2.5 keeps; ComfyUI's VideoVAE), and the audio VAE.

Both are built with ComfyUI's classes at small widths (tiny_comfy), saved under the key names and
with the metadata "config" that ComfyUI's VAELoader reads:
- video (`CausalDiffusionVAE`, detected by `decoder.conv_in_x_t.weight`): the conv encoder (as
  LTX-2's, base 8 channels) and the neighbourhood-attention decoder with the released layout
  (4 deterministic stages with pixel-shuffle upsamples, then one-step diffusion blocks), the real
  x8 time and x32 space factors, 128 latent channels. Its attention windows are (3, 3, 3) in every
  stage, so a latent of 1 frame and 3 x 3 cells decodes (the released kernels need far more).
- audio (`AudioVAE`, detected by `vocoder.resblocks.0.convs1.0.weight`): the same tiny autoencoder
  and vocoder settings as the LTX-2 tiny checkpoint, keys `audio_vae.*` and `vocoder.*`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from .tiny_comfy import comfyui_for_tiny, random_state
from .tiny_model import CONV_GAIN, _save, tiny_checkpoint_config

# The released names the 2.5 templates' VAELoaders pick (the conv decoder option is no template's).
VIDEO_VAE_FILE_NAME = "ltx-2.5-video-vae-bf16.safetensors"
CONV_VIDEO_VAE_FILE_NAME = "ltx-2.5-tiny-video-vae-conv-decoder.safetensors"
AUDIO_VAE_FILE_NAME = "ltx-2.5-audio-vae-bf16.safetensors"
# Decoder widths: each pixel-shuffle stage divides the width by its reduction (released:
# 2048, 1024, 512, 512, 256 with 64-wide heads); here 8-wide heads, 1 to 8 per stage.
DECODER_STAGE_CHANNELS = (64, 32, 16, 16, 8)
DECODER_HEAD_DIM = 8
DECODER_T_EMB_DIM = 32
# One block per stage (released: 4, 6, 4, 2, 8).
DECODER_STAGE_DEPTHS = (1, 1, 1, 1, 1)
DECODER_KERNEL = (3, 3, 3)
ENCODER_BASE_CHANNELS = 8
# The diffusion decoder's last Linear writes pixels: scaled so decoded values land mostly in [-1, 1].
VIDEO_OUTPUT_GAIN = 0.5


def tiny_video_vae_25_config() -> dict[str, Any]:
    """The metadata "config" of the tiny LTX-2.5 video VAE ({"vae": ...}, as ComfyUI reads it)."""
    encoder = {
        "dims": 3,
        "in_channels": 3,
        "out_channels": 128,
        "blocks": [
            ["res_x", {"num_layers": 1}],
            ["compress_space_res", {"multiplier": 2}],
            ["compress_time_res", {"multiplier": 2}],
            ["compress_all_res", {"multiplier": 2}],
            ["compress_all_res", {"multiplier": 1}],
        ],
        "patch_size": 4,
        "latent_log_var": "constant",
        "norm_layer": "pixel_norm",
        "base_channels": ENCODER_BASE_CHANNELS,
        "spatial_padding_mode": "zeros",
    }
    decoder = {
        "in_channels": 128,
        "out_channels": 3,
        "patch_size": 4,
        "head_dim": DECODER_HEAD_DIM,
        "stage_channels": list(DECODER_STAGE_CHANNELS),
        "stage_depths": list(DECODER_STAGE_DEPTHS),
        "stage_kernels": [list(DECODER_KERNEL)] * 5,
        # The released upsample plan: (1,2,2) x2-reduce, (2,1,1) x2, (2,2,2) x1, (2,2,2) x2.
        "upsamples": [[[1, 2, 2], 2], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 2]],
        "stage5_kernel": list(DECODER_KERNEL),
        "t_emb_dim": DECODER_T_EMB_DIM,
        "timestep_scale_multiplier": 1000.0,
        "default_num_inference_steps": 1,
    }
    vae = {"_class_name": "CausalDiffusionVAE", "dims": 3, "model_output_type": "x0"}
    return {"vae": vae | {"encoder": encoder, "decoder": decoder}}


def tiny_audio_vae_25_config() -> dict[str, Any]:
    """The metadata "config" of the tiny LTX-2.5 audio VAE ({"audio_vae", "vocoder"})."""
    full = tiny_checkpoint_config()
    return {"audio_vae": copy.deepcopy(full["audio_vae"]), "vocoder": copy.deepcopy(full["vocoder"])}


def tiny_video_vae_25(out_path: Path | str, seed: int = 0) -> Path:
    """Write the tiny LTX-2.5 video VAE (diffusion decoder) to `out_path`; same seed, same bytes.

    Needs a ComfyUI (tiny_comfy.comfyui_for_tiny). VAELoader builds it as CausalDiffusionVAE.
    """
    comfyui_for_tiny()
    from comfy.ldm.lightricks.vae.na_diffusion_decoder import CausalDiffusionVAE

    config = tiny_video_vae_25_config()
    vae = CausalDiffusionVAE(config=config["vae"])
    tensors = random_state(vae, lambda key: key, seed, CONV_GAIN)
    out_key = "decoder.conv_out.weight"
    tensors[out_key] = tensors[out_key] * VIDEO_OUTPUT_GAIN
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _save(tensors, config, path)
    return path


def tiny_conv_video_vae_25(out_path: Path | str, seed: int = 0) -> Path:
    """Write the tiny LTX-2.5 video VAE with the conv decoder (LTX-2.5 keeps it as an option; ComfyUI
    builds it as VideoVAE from the metadata config): the LTX-2 tiny VAE's settings, drawn with
    ComfyUI's class, keys `encoder.*`, `decoder.*`, `per_channel_statistics.*` as a separate VAE file."""
    comfyui_for_tiny()
    from comfy.ldm.lightricks.vae.causal_video_autoencoder import VideoVAE

    config = {"vae": copy.deepcopy(tiny_checkpoint_config()["vae"])}
    vae = VideoVAE(config=config["vae"])
    tensors = random_state(vae, lambda key: key, seed, CONV_GAIN)
    # As tiny_model's OUTPUT_GAINS for the same decoder: decoded pixels mostly inside [-1, 1].
    tensors["decoder.conv_out.conv.weight"] = tensors["decoder.conv_out.conv.weight"] * 0.75
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _save(tensors, config, path)
    return path


def tiny_audio_vae_25(out_path: Path | str, seed: int = 0) -> Path:
    """Write the tiny LTX-2.5 audio VAE (autoencoder, statistics, vocoder) to `out_path`."""
    comfyui_for_tiny()
    from comfy.ldm.lightricks.vae.audio_vae import AudioVAE

    config = tiny_audio_vae_25_config()
    vae = AudioVAE(metadata={"config": json.dumps(config)})

    def to_file_key(key: str) -> str:
        return "audio_vae." + key.removeprefix("autoencoder.") if key.startswith("autoencoder.") else key

    tensors = random_state(vae, to_file_key, seed, CONV_GAIN)
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _save(tensors, config, path)
    return path
