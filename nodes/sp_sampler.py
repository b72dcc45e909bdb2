"""SP Sampler: sequence-parallel denoising over the worker group; same result as one GPU."""

from __future__ import annotations

import dataclasses

import torch

from ..workers.group.client import output_slot
from ..workers.group.manager import MGPUModel
from ..workers.wire.checks import SAMPLERS, check_splittable
from ..workers.wire.requests import Sample
from . import comfy
from .convert import conditioning_args, split_latent
from .jobs import run_job
from .loader import CATEGORY


def latent_output(parts, video: torch.Tensor, audio: torch.Tensor | None, source: dict) -> dict:
    """A LATENT of the same structure as `source` with new samples (other keys kept, as native samplers do)."""
    out = dict(source)
    out["samples"] = comfy.nested_tensor([video, audio]) if parts.nested else video
    return out


class LTX2SPSampler:
    DESCRIPTION = (
        "Denoises an LTX-2 latent (video, or audio+video from LTXVConcatAVLatent) with the video tokens split "
        "over the worker group's GPUs. Same result as single-GPU sampling for the same seed."
    )
    CATEGORY = CATEGORY
    RETURN_TYPES = ("LATENT",)
    FUNCTION = "sample"

    @classmethod
    def INPUT_TYPES(cls) -> dict:
        return {
            "required": {
                "mgpu_model": ("MGPU_MODEL", {"tooltip": "From MGPU Loader."}),
                "positive": (
                    "CONDITIONING",
                    {"tooltip": "LTX-2 text encoding (through LTXVConditioning for the frame rate)."},
                ),
                "negative": (
                    "CONDITIONING",
                    {"tooltip": "Negative prompt; unused when both cfg values are 1."},
                ),
                "latent": (
                    "LATENT",
                    {
                        "tooltip": "EmptyLTXVLatentVideo / LTXVImgToVideo, or LTXVConcatAVLatent for audio+video."
                    },
                ),
                "sigmas": ("SIGMAS", {"tooltip": "LTXVScheduler or ManualSigmas."}),
                "sampler_name": (list(SAMPLERS), {"default": "euler"}),
                "cfg": (
                    "FLOAT",
                    {
                        "default": 4.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.1,
                        "round": 0.01,
                        "tooltip": "Guidance scale for the video stream.",
                    },
                ),
                "cfg_audio": (
                    "FLOAT",
                    {
                        "default": 4.0,
                        "min": 0.0,
                        "max": 100.0,
                        "step": 0.1,
                        "round": 0.01,
                        "tooltip": "Guidance scale for the audio stream. ComfyUI's CFGGuider uses one "
                        "value for both: set it equal to cfg to match a native run.",
                    },
                ),
                "seed": (
                    "INT",
                    {"default": 0, "min": 0, "max": 0xFFFFFFFFFFFFFFFF, "control_after_generate": True},
                ),
            },
            "optional": {
                "add_noise": (
                    "BOOLEAN",
                    {"default": True, "tooltip": "Off: denoise the latent as it is (no initial noise)."},
                ),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    def sample(
        self,
        mgpu_model: MGPUModel,
        positive,
        negative,
        latent: dict,
        sigmas: torch.Tensor,
        sampler_name: str,
        cfg: float,
        cfg_audio: float,
        seed: int,
        add_noise: bool = True,
        unique_id=None,
    ):
        parts = split_latent(latent)
        check_splittable(tuple(parts.video.shape[2:]), mgpu_model.world_size)
        pos, frame_rate = conditioning_args(positive, "positive")
        neg, _ = conditioning_args(negative, "negative")
        request = Sample(
            video=parts.video.float().contiguous(),
            audio=None if parts.audio is None else parts.audio.float().contiguous(),
            video_mask=None if parts.video_mask is None else parts.video_mask.float().contiguous(),
            audio_mask=None if parts.audio_mask is None else parts.audio_mask.float().contiguous(),
            sigmas=sigmas.float().cpu().contiguous(),
            positive=pos,
            negative=neg,
            frame_rate=frame_rate,
            sampler=sampler_name,
            cfg_video=cfg,
            cfg_audio=cfg_audio,
            seed=seed,
            add_noise=add_noise,
            max_video_tokens=mgpu_model.max_video_tokens,
            preview=comfy.previews_enabled(),
        )
        # Slots only once the request passed its checks: a refused input leaves nothing in /dev/shm.
        out_video = output_slot(parts.video.shape, torch.float32)
        out_audio = None if parts.audio is None else output_slot(parts.audio.shape, torch.float32)
        request = dataclasses.replace(request, out_video=out_video, out_audio=out_audio)
        run_job(mgpu_model, request, node_id=unique_id, total=max(1, sigmas.numel() - 1))
        audio = None if out_audio is None else out_audio.tensor
        return (latent_output(parts, out_video.tensor, audio, latent),)


NODE_CLASSES = {"LTX2SPSampler": (LTX2SPSampler, "SP Sampler")}
