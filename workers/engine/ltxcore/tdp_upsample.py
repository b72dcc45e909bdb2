"""Step 1 of the TDP stage: the stage-1 latent upsampled 2x by ltx-core's spatial latent upsampler,
between the video VAE's per-channel statistics (un-normalise -> upsample -> normalise, as ComfyUI's
LTXVLatentUpsampler does). The statistics and the upsampler are loaded once per rank and kept in
LoadedModel.extras.
"""

from __future__ import annotations

import torch
from ltx_core.model.video_vae.ops import PerChannelStatistics
from safetensors import safe_open

from ...wire.model_files import read_safetensors_header
from .checkpoint import load_upsampler
from .model import LoadedModel

# Where the VAE's per-channel statistics sit in a full LTX-2 checkpoint (workers/engine/ltxcore/checkpoint.py).
STATISTICS_PREFIX = "vae.per_channel_statistics."
_STATISTICS_KEY = "video_statistics"
_UPSAMPLER_KEY = "spatial_upsampler:"  # + file path: one upsampler cached per rank at a time


def video_statistics(model: LoadedModel, device: torch.device) -> PerChannelStatistics:
    """The video VAE's per-channel statistics from the loaded checkpoint (cached in model.extras)."""
    cached = model.extras.get(_STATISTICS_KEY)
    if cached is not None:
        return cached
    header = read_safetensors_header(model.path)
    names = ("mean-of-means", "std-of-means")
    missing = [STATISTICS_PREFIX + n for n in names if STATISTICS_PREFIX + n not in header.shapes]
    if missing:
        raise ValueError(
            f"{model.path} holds no video VAE statistics ({', '.join(missing)}); the TDP Upscaler needs them "
            "to upsample. Load a full LTX-2 checkpoint (with its VAE) in the MGPU Loader."
        )
    statistics = PerChannelStatistics(latent_channels=header.shapes[STATISTICS_PREFIX + names[0]][0])
    with safe_open(str(model.path), framework="pt", device="cpu") as f:
        for name in names:
            statistics.register_buffer(name, f.get_tensor(STATISTICS_PREFIX + name).to(torch.float32))
    model.extras[_STATISTICS_KEY] = statistics.to(device).eval()
    return model.extras[_STATISTICS_KEY]


def spatial_upsampler(model: LoadedModel, path: str, device: torch.device) -> torch.nn.Module:
    """ltx-core's latent upsampler from `path` in the model's dtype, loaded once per rank (kept in
    model.extras until another upscaler file is asked for)."""
    key = _UPSAMPLER_KEY + path
    if key not in model.extras:
        for stale in [k for k in model.extras if k.startswith(_UPSAMPLER_KEY)]:
            del model.extras[stale]
        model.extras[key] = load_upsampler(path, device, model.dtype)
    return model.extras[key]


def upsample_video(
    video: torch.Tensor, upsampler: torch.nn.Module, statistics: PerChannelStatistics, dtype: torch.dtype
) -> torch.Tensor:
    """Normalised latent [B,C,F,H,W] -> normalised latent [B,C,F,2H,2W] float32, computed in `dtype`
    on the upsampler's device (un-normalise -> upsample -> normalise, as LTXVLatentUpsampler)."""
    device = next(upsampler.parameters()).device
    with torch.inference_mode():
        x = statistics.un_normalize(video.to(device=device, dtype=dtype))
        return statistics.normalize(upsampler(x)).float()
