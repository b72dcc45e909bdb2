"""LTX-2's audio VAE and vocoder as ComfyUI loads and runs them (LTXVAudioVAELoader, LTXVAudioVAEDecode in
comfy_extras/nodes_lt_audio.py). Import only after bootstrap.import_comfyui."""

from __future__ import annotations

from pathlib import Path

import torch

# Where ComfyUI's audio VAE class expects the checkpoint's audio weights (LTXVAudioVAELoader's renames).
AUDIO_PREFIXES = {"audio_vae.": "autoencoder.", "vocoder.": "vocoder."}


def load_audio_vae(path: Path, device: torch.device):
    """comfy.sd.VAE of the checkpoint's audio VAE and vocoder, on `device`. Raises ValueError naming the
    file when it holds none."""
    import comfy.sd
    import comfy.utils

    sd, metadata = comfy.utils.load_torch_file(str(path), return_metadata=True)
    sd = comfy.utils.state_dict_prefix_replace(sd, AUDIO_PREFIXES, filter_keys=True)
    if not sd:
        raise ValueError(f"{path} holds no audio VAE (no audio_vae.* weights); decode its video only")
    vae = comfy.sd.VAE(sd=sd, metadata=metadata, device=device)
    try:
        vae.throw_exception_if_invalid()
    except RuntimeError as exc:
        raise ValueError(f"{path}: ComfyUI cannot build its audio VAE ({exc})") from exc
    return vae


def decode_audio(vae, latent: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Audio latent [B, 8, T, 16] -> (waveform [B, channels, samples] float32 on the CPU, sample rate),
    as LTXVAudioVAEDecode returns them."""
    waveform = vae.decode(latent).movedim(-1, 1)
    return waveform.to(device="cpu", dtype=torch.float32), int(vae.first_stage_model.output_sample_rate)
