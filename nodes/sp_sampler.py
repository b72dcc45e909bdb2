"""SP Sampler: sequence-parallel denoising over the worker group; same result as one GPU."""

from __future__ import annotations

import dataclasses

import torch

from ..workers.group import console
from ..workers.group.client import output_slot
from ..workers.group.manager import MGPUModel
from ..workers.wire.capabilities import capabilities, check_native_guider
from ..workers.wire.checks import check_splittable
from ..workers.wire.model_call import CACHE_MISS
from ..workers.wire.requests import Sample
from . import comfy
from .convert import conditioning_args, split_latent
from .guider_spec import describe_guider
from .jobs import run_job


def latent_output(parts, video: torch.Tensor, audio: torch.Tensor | None, source: dict) -> dict:
    """A LATENT of the same structure as `source` with new samples (other keys kept, as native samplers do)."""
    out = dict(source)
    out["samples"] = comfy.nested_tensor([video, audio]) if parts.nested else video
    return out


def sample_latent(
    mgpu_model: MGPUModel,
    positive=None,  # optional inputs (a guider replaces them); their old place kept for callers
    negative=None,
    latent: dict | None = None,
    sigmas: torch.Tensor | None = None,
    sampler_name: str = "euler",
    cfg: float = 4.0,
    cfg_audio: float = 4.0,
    seed: int = 0,
    add_noise: bool = True,
    guider=None,
    node_id: str | None = None,
):
    """SP Sampler: denoise `latent` over the group with the video tokens split over its GPUs; returns
    (LATENT,) of the same structure. Raises ValueError naming the input to change."""
    if latent is None or sigmas is None:
        raise ValueError("the SP Sampler needs a latent and sigmas: connect both")
    parts = split_latent(latent)
    check_splittable(tuple(parts.video.shape[2:]), mgpu_model.world_size)
    guidance = guidance_fields(mgpu_model, positive, negative, guider)
    request = Sample(
        video=parts.video.float().contiguous(),
        audio=None if parts.audio is None else parts.audio.float().contiguous(),
        video_mask=None if parts.video_mask is None else parts.video_mask.float().contiguous(),
        audio_mask=None if parts.audio_mask is None else parts.audio_mask.float().contiguous(),
        sigmas=sigmas.float().cpu().contiguous(),
        sampler=sampler_name,
        cfg_video=cfg,
        cfg_audio=cfg_audio,
        seed=seed,
        add_noise=add_noise,
        max_video_tokens=mgpu_model.max_video_tokens,
        preview=comfy.previews_enabled(),
        guidance_groups=mgpu_model.guidance_groups,
        **guidance,
    )
    # Slots only once the request passed its checks: a refused input leaves nothing in /dev/shm.
    out_video = output_slot(parts.video.shape, torch.float32)
    out_audio = None if parts.audio is None else output_slot(parts.audio.shape, torch.float32)
    request = dataclasses.replace(request, out_video=out_video, out_audio=out_audio)
    replies = run_guided(mgpu_model, request, guider, node_id, max(1, sigmas.numel() - 1))
    report_plan(replies)
    audio = None if out_audio is None else out_audio.tensor
    return (latent_output(parts, out_video.tensor, audio, latent),)


_last_plan: list[str] = [""]


def report_plan(replies: list[dict]) -> None:
    """The guidance plan on the console when passes ran side by side, once until it changes."""
    plan = replies[0].get("guidance", "") if replies and replies[0].get("guidance_groups", 1) > 1 else ""
    if plan and plan != _last_plan[0]:
        console.info(plan)
    _last_plan[0] = plan


def guidance_fields(mgpu_model: MGPUModel, positive, negative, guider) -> dict:
    """The Sample fields of the node's guidance: a GUIDER's description, or the two prompts."""
    if guider is not None:
        if positive is not None or negative is not None:
            raise ValueError(
                "connect either a guider or positive / negative to the SP Sampler, not both: the guider "
                "carries its own conditioning and scales"
            )
        check_native_guider(capabilities(mgpu_model.backend), "a GUIDER on the SP Sampler")
        return {"guider": describe_guider(guider, mgpu_model)}
    if positive is None or negative is None:
        raise ValueError(
            "the SP Sampler needs positive and negative conditioning (or a guider): connect the "
            f"{'positive' if positive is None else 'negative'} input"
        )
    pos, frame_rate = conditioning_args(positive, "positive")
    neg, _ = conditioning_args(negative, "negative")
    return {"positive": pos, "negative": neg, "frame_rate": frame_rate}


def run_guided(mgpu_model: MGPUModel, request: Sample, guider, node_id, total: int) -> list[dict]:
    """run_job, sending a GUIDER's weight patch set once more if a restarted group lost it."""
    try:
        return run_job(mgpu_model, request, node_id=node_id, total=total)
    except ValueError as exc:
        if guider is None or not str(exc).startswith(CACHE_MISS):
            raise
    guider.model_patcher.model.diffusion_model.call.patch_sender.forget()
    request = dataclasses.replace(request, guider=describe_guider(guider, mgpu_model))
    return run_job(mgpu_model, request, node_id=node_id, total=total)
