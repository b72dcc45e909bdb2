"""Step 1 of the TDP stage on the comfy backend: the stage-1 video latent upsampled by ComfyUI's own
latent upsampler, loaded and applied the way its nodes do it.

- Loading follows LatentUpscaleModelLoader (comfy_extras/nodes_hunyuan.py, the LTX branch): the
  file's state dict and its metadata "config" build comfy.ldm.lightricks.latent_upsampler.
  LatentUpsampler with ComfyUI's weight-init-free ops, in ComfyUI's VAE dtype for the device.
- Applying follows LTXVLatentUpsampler (comfy_extras/nodes_lt_upsampler.py): un-normalise with the
  video VAE's per-channel statistics, upsample, normalise, back to the input dtype.

The loader node lives in a nodes module that pulls in ComfyUI's node registry, so the few lines are
repeated here on ComfyUI's model-side classes; tests/test_comfy_tdp.py compares the result with
both native nodes, so a change there fails a test rather than drifting. Import only after
bootstrap.import_comfyui.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .model import ComfyModel

# A key only the LTX latent upsampler has (LatentUpscaleModelLoader tells the families apart so).
LTX_UPSAMPLER_KEY = "post_upsample_res_blocks.0.conv2.bias"
_CACHE_PREFIX = "latent_upsampler:"  # + file path: one upsampler kept per rank at a time
_UPSAMPLED_KEY = "upsampled_video"  # the last job's (file, stage-1 latent, upsampled latent)
_STATISTICS_KEY = "video_statistics"
# Where a single-file LTX checkpoint keeps the video VAE's statistics (ComfyUI's VAE loads them from here).
STATISTICS_PREFIX = "vae.per_channel_statistics."
STATISTICS_NAMES = ("std-of-means", "mean-of-means")


def load_latent_upsampler(path: Path, device: torch.device) -> torch.nn.Module:
    """The LTX latent upsampler in `path` on `device`, as LatentUpscaleModelLoader builds it.
    ValueError naming the file when it is no LTX latent upsampler."""
    import comfy.model_management as mm
    import comfy.ops
    import comfy.utils
    from comfy.ldm.lightricks.latent_upsampler import LatentUpsampler

    state_dict, metadata = comfy.utils.load_torch_file(str(path), safe_load=True, return_metadata=True)
    if LTX_UPSAMPLER_KEY not in state_dict or not metadata or "config" not in metadata:
        raise ValueError(
            f"{path} is not an LTX latent upscale model (no {LTX_UPSAMPLER_KEY} or no metadata config); "
            "pick the ltx-2 spatial upscaler file from models/latent_upscale_models"
        )
    config = json.loads(metadata["config"])
    dtype = mm.vae_dtype(device, allowed_dtypes=[torch.bfloat16, torch.float32])
    upsampler = LatentUpsampler.from_config(config, operations=comfy.ops.disable_weight_init).to(dtype=dtype)
    upsampler.load_state_dict(state_dict)
    return upsampler.to(device).eval()


def cached_latent_upsampler(
    model: ComfyModel, path: Path, device: torch.device
) -> tuple[torch.nn.Module, bool]:
    """load_latent_upsampler, kept in model.extras until another file is asked for; (upsampler, whether
    it was already loaded)."""
    key = _CACHE_PREFIX + str(path)
    reused = key in model.extras
    if not reused:
        for stale in [k for k in model.extras if k.startswith(_CACHE_PREFIX)]:
            del model.extras[stale]
        model.extras[key] = load_latent_upsampler(path, device)
    return model.extras[key], reused


def upsampled_from_before(model: ComfyModel, path: Path, video: torch.Tensor) -> torch.Tensor | None:
    """The last job's upsampled latent when it came from the same file and the same stage-1 latent
    (bit for bit): the artist's re-queue with other tiles, seed, sigmas or preview skips the upsampler."""
    kept = model.extras.get(_UPSAMPLED_KEY)
    if kept is None or kept[0] != str(path) or not _same(kept[1], video):
        return None
    return kept[2]


def keep_upsampled(model: ComfyModel, path: Path, video: torch.Tensor, upsampled: torch.Tensor) -> None:
    model.extras[_UPSAMPLED_KEY] = (str(path), video.detach().cpu().clone(), upsampled)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b.to(a.device))


def video_statistics(model: ComfyModel) -> torch.nn.Module:
    """The video VAE's per-channel statistics (un_normalize / normalize) of the loaded file: the
    loaded VAE's own, else ComfyUI's statistics module filled from the file (the ranks load the
    diffusion model without its VAE). Kept in model.extras. ValueError when the file holds none."""
    if model.vae is not None:
        return model.vae.first_stage_model.per_channel_statistics
    if _STATISTICS_KEY not in model.extras and model.vae_files.video is not None:
        # A separate VAE file keeps its statistics at the top level (per_channel_statistics.*).
        model.extras[_STATISTICS_KEY] = _statistics_from_file(model.vae_files.video, prefix="")
    elif _STATISTICS_KEY not in model.extras:
        model.extras[_STATISTICS_KEY] = _statistics_from_file(model.path)
    return model.extras[_STATISTICS_KEY]


def _statistics_from_file(path: Path, prefix: str = "vae.") -> torch.nn.Module:
    from comfy.ldm.lightricks.vae.causal_video_autoencoder import processor
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as f:
        stats_prefix = prefix + STATISTICS_PREFIX.removeprefix("vae.")
        missing = [stats_prefix + n for n in STATISTICS_NAMES if stats_prefix + n not in f.keys()]
        if missing:
            raise ValueError(
                f"{path} holds no video VAE statistics ({', '.join(missing)}), which the TDP Upscaler needs to "
                "upsample; load a single-file LTX checkpoint (with its VAE) in the MGPU Loader"
            )
        statistics = processor()
        for name in STATISTICS_NAMES:
            statistics.register_buffer(name, f.get_tensor(stats_prefix + name))
    return statistics.eval()


def upsample_video(model: ComfyModel, upsampler: torch.nn.Module, video: torch.Tensor) -> torch.Tensor:
    """Normalised video latent [B,C,F,H,W] -> normalised [B,C,F,2H,2W] in `video`'s dtype, on the
    upsampler's device; the arithmetic of LTXVLatentUpsampler."""
    statistics = video_statistics(model)
    weight = next(upsampler.parameters())
    with torch.inference_mode():
        # The statistics' buffers follow x's dtype and device inside un_normalize / normalize.
        x = statistics.un_normalize(video.to(device=weight.device, dtype=weight.dtype))
        return statistics.normalize(upsampler(x)).to(dtype=video.dtype)
