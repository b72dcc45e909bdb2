"""Sampling inside a rank with ComfyUI's own sampler code: what SamplerCustomAdvanced does, node-free.

Every rank runs the same guider (comfy.samplers.CFGGuider, or the dual-scale form of
LTXVDualCFGGuider) and the same KSAMPLER loop from the same seed, so noise, packing of audio+video,
CFG and the sampler's own noise equal native ComfyUI by construction; the model call is whatever the
patcher serves (sequence-parallel, tiled...). Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import comfy.model_management
import comfy.nested_tensor
import comfy.sample
import comfy.samplers
import torch

# callback(step, total_steps, x0, x): after each model evaluation of step `step` (0-based), with the
# denoised estimate and the current latent, both as lists of streams (video first).
StepCallback = Callable[[int, int, list[torch.Tensor], list[torch.Tensor]], None]


class DualScaleGuider(comfy.samplers.CFGGuider):
    """CFG with one scale for the video stream and another for the audio stream of a packed AV latent
    (the computation of ComfyUI's LTXVDualCFGGuider). Equal scales are plain CFG."""

    def set_scales(self, video_cfg: float, audio_cfg: float) -> None:
        self.video_cfg, self.audio_cfg = video_cfg, audio_cfg
        self.cfg = max(video_cfg, audio_cfg)
        self.video_numel: int | None = None

    def sample(self, noise, latent_image, *args, **kwargs):
        # The packed latent puts each item's video values first: remember where audio starts.
        parts = latent_image.unbind() if getattr(latent_image, "is_nested", False) else []
        self.video_numel = math.prod(parts[0].shape[1:]) if len(parts) >= 2 else None
        return super().sample(noise, latent_image, *args, **kwargs)

    def predict_noise(self, x, timestep, model_options={}, seed=None):  # noqa: B006 (ComfyUI's signature)
        split = self.video_numel
        if split is None or math.isclose(self.video_cfg, self.audio_cfg):
            self.cfg = self.video_cfg
            return super().predict_noise(x, timestep, model_options, seed)
        scales = (self.video_cfg, self.audio_cfg)

        def per_stream_cfg(args: dict) -> torch.Tensor:
            cond, uncond = args["cond"], args["uncond"]
            out = uncond + (cond - uncond) * scales[0]
            out[..., split:] = uncond[..., split:] + (cond[..., split:] - uncond[..., split:]) * scales[1]
            return out

        # The uncond pass must run even when one scale is 1.
        options = {**model_options, "sampler_cfg_function": per_stream_cfg, "disable_cfg1_optimization": True}
        return super().predict_noise(x, timestep, options, seed)


def sample(
    patcher: Any,
    positive: list,
    negative: list,
    latent: dict,
    sigmas: torch.Tensor,
    sampler_name: str,
    cfg: float,
    seed: int,
    *,
    cfg_audio: float | None = None,
    add_noise: bool = True,
    callback: StepCallback | None = None,
) -> dict:
    """Denoise ComfyUI's LATENT `latent` ({"samples": tensor or NestedTensor (video, audio), optional
    "noise_mask"}) with `patcher` (a comfy ModelPatcher) as SamplerCustomAdvanced would with
    RandomNoise(seed) (or DisableNoise), KSamplerSelect(sampler_name) and CFGGuider(cfg), or
    LTXVDualCFGGuider(cfg, cfg_audio) when cfg_audio is given and differs. `positive`/`negative` are
    ComfyUI CONDITIONING. Returns a new LATENT dict (inputs are not modified); on every rank alike.
    """
    guider = make_guider(patcher, positive, negative, cfg, cfg_audio)
    return sample_with(guider, latent, sigmas, sampler_name, seed, add_noise=add_noise, callback=callback)


def sample_with(
    guider: comfy.samplers.CFGGuider,
    latent: dict,
    sigmas: torch.Tensor,
    sampler_name: str,
    seed: int,
    *,
    add_noise: bool = True,
    callback: StepCallback | None = None,
) -> dict:
    """`sample` with a guider already built (a native GUIDER rebuilt here: engine/comfy/guidance.py)."""
    latent_image = comfy.sample.fix_empty_latent_channels(
        guider.model_patcher,
        latent["samples"],
        latent.get("downscale_ratio_spacial"),
        latent.get("downscale_ratio_temporal"),
    )
    if add_noise:
        noise = comfy.sample.prepare_noise(latent_image, seed, latent.get("batch_index"))
    elif latent_image.is_nested:
        noise = comfy.nested_tensor.NestedTensor([torch.zeros_like(t) for t in latent_image.unbind()])
    else:
        noise = torch.zeros(latent_image.size(), dtype=latent_image.dtype, layout=latent_image.layout)
    sampler = comfy.samplers.sampler_object(sampler_name)
    samples = guider.sample(
        noise,
        latent_image,
        sampler,
        sigmas,
        denoise_mask=latent.get("noise_mask"),
        callback=None if callback is None else _comfy_callback(callback),
        disable_pbar=True,
        seed=seed,
    )
    out = {
        k: v for k, v in latent.items() if k not in ("downscale_ratio_spacial", "downscale_ratio_temporal")
    }
    out["samples"] = samples.to(comfy.model_management.intermediate_device())
    return out


def make_guider(patcher: Any, positive: list, negative: list, cfg: float, cfg_audio: float | None):
    if cfg_audio is None or math.isclose(cfg, cfg_audio):
        guider = comfy.samplers.CFGGuider(patcher)
        guider.set_cfg(cfg)
    else:
        guider = DualScaleGuider(patcher)
        guider.set_scales(cfg, cfg_audio)
    guider.set_conds(positive, negative)
    return guider


def streams(value: torch.Tensor) -> list[torch.Tensor]:
    """The streams of a latent (video first): a NestedTensor's parts, or the one tensor."""
    return list(value.unbind()) if getattr(value, "is_nested", False) else [value]


def _comfy_callback(callback: StepCallback) -> Callable:
    def on_step(step: int, x0: torch.Tensor, x: torch.Tensor, total_steps: int) -> None:
        callback(step, total_steps, streams(x0), streams(x))

    return on_step
