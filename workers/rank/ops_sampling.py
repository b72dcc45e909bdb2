"""The "sample" command: sequence-parallel denoising of a video (or audio+video) latent.

Inputs arrive replicated on every rank (mapped from the client's shared memory); every rank runs the
same loop and holds identical latents after each step; rank 0 writes the result into the output
slots the client allocated.
"""

from __future__ import annotations

import torch

from ..engine.ltxcore import latents, sampling
from ..engine.ltxcore.conditioning import (
    TextContext,
    check_conditioning_width,
    context_from_features,
    context_from_processed,
)
from ..engine.ltxcore.model import AVDenoiser, Guidance, LoadedModel
from ..wire.checks import check_splittable
from ..wire.requests import Forward, Sample, TextConditioning
from .ops import InputRejected, op
from .ops_comfy import is_comfy_model, sample_comfy
from .preview import step_callbacks


def loaded_model(job) -> LoadedModel:
    model = job.runtime.state.get("model")
    if model is None:
        raise InputRejected("no model is loaded in the worker group; run the MGPU Loader first")
    if not isinstance(model, LoadedModel):
        raise InputRejected(
            "this command runs on the ltx-core backend only, and the group holds the model on the comfy "
            "backend; load it with LTX2_MGPU_BACKEND=ltxcore"
        )
    return model


def text_context(
    model: LoadedModel, cond: TextConditioning | None, device: torch.device, what: str
) -> TextContext | None:
    """A request's conditioning in the model's text context (its width checked against the model)."""
    if cond is None:
        return None
    try:
        check_conditioning_width(cond.tensor, cond.unprocessed, model.description, what)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    with torch.inference_mode():
        if cond.unprocessed:
            return context_from_features(cond.tensor, model.processor, device, model.dtype)
        return context_from_processed(cond.tensor, device, model.dtype)


def check_split(request: Sample | Forward, world_size: int) -> None:
    """The one check a request cannot run itself (it needs the group size), alike on every rank."""
    try:
        check_splittable(tuple(request.video.shape[2:]), world_size)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc


def build_denoiser(
    job, request: Sample | Forward, guidance: Guidance
) -> tuple[AVDenoiser, list[sampling.Stream]]:
    """The model call for a request's latents and prompts (the request checked the latents)."""
    model = loaded_model(job)
    check_split(request, job.world_size)
    device = job.runtime.device
    positive = text_context(model, request.positive, device, "positive")
    negative = text_context(model, request.negative, device, "negative")
    video, audio = request.video, request.audio
    streams = [sampling.Stream(video, request.video_mask)]
    if audio is not None:
        streams.append(sampling.Stream(audio, request.audio_mask))
    timing = latents.AudioTiming(
        sample_rate=model.description.audio_sample_rate_hz, hop_length=model.description.audio_hop_length
    )
    try:
        denoiser = AVDenoiser(
            model,
            positive,
            negative,
            guidance,
            video.shape,
            None if audio is None else audio.shape,
            request.frame_rate,
            device,
            timing,
        )
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    return denoiser, streams


@op(Sample)
def sample(job, request: Sample) -> dict:
    rt = job.runtime
    if is_comfy_model(rt.state.get("model")):
        return sample_comfy(job, request)
    if request.guider is not None or request.guidance_groups > 1:
        raise InputRejected(
            "a GUIDER and guidance groups run on ComfyUI's model stack in the workers, and this group holds "
            "the model on ltx-core: load it with mode comfyui and compile_blocks / fp8_matmul off"
        )
    denoiser, streams = build_denoiser(job, request, Guidance(request.cfg_video, request.cfg_audio))
    if request.add_noise:
        noise = sampling.initial_noise(request.seed, [s.latent.shape for s in streams])
    else:
        noise = [torch.zeros_like(s.latent, dtype=torch.float32) for s in streams]
    settings = sampling.SamplerSettings(name=request.sampler, eta=request.eta, s_noise=request.s_noise)

    on_denoised, on_step = step_callbacks(job, request.preview)

    job.check_cancel()
    result = sampling.sample(
        denoiser,
        streams,
        noise,
        request.sigmas.float(),
        settings,
        seed=request.seed,
        device=rt.device,
        on_step=on_step,
        on_denoised=on_denoised,
    )
    if rt.rank == 0:
        request.out_video.copy_(result[0].to(request.out_video.dtype))
        if len(result) > 1:
            request.out_audio.copy_(result[1].to(request.out_audio.dtype))
    return {"steps": len(request.sigmas) - 1, "exchange": getattr(rt.state.get("exchange"), "name", "none")}


@op(Forward)
def forward(job, request: Forward) -> dict:
    """One transformer forward (no CFG) at request.sigma: velocities written to out_video / out_audio
    as tokens [B, T, C]. For parity tests and benchmarks."""
    denoiser, streams = build_denoiser(job, request, Guidance(1.0, 1.0))
    device = job.runtime.device
    xs = [s.latent.to(device=device, dtype=torch.float32) for s in streams]
    masks = [
        None if s.noise_mask is None else s.noise_mask.to(device=device, dtype=torch.float32) for s in streams
    ]
    (_, v_out), audio = denoiser.velocity(xs, request.sigma, masks)
    if job.rank == 0:
        request.out_video.copy_(v_out.float())
        if audio is not None:
            request.out_audio.copy_(audio[1].float())
    return {"exchange": getattr(job.runtime.state.get("exchange"), "name", "none")}
