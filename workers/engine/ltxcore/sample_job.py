"""The SP Sampler's job (and the single forward of parity tests and benchmarks) on the ltx-core engine.

Inputs arrive replicated on every rank (mapped from the client's shared memory); every rank runs the
same loop and holds identical latents after each step; rank 0 writes the result into the output slots
the client allocated. The handler checked the split.
"""

from __future__ import annotations

import torch

from ...wire.requests import Forward, Sample, TextConditioning
from ..protocol import InputRejected, Job
from . import latents, sampling
from .conditioning import TextContext, check_conditioning_width, context_from_features, context_from_processed
from .model import AVDenoiser, Guidance, LoadedModel


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


def audio_timing(model: LoadedModel) -> latents.AudioTiming:
    d = model.description
    return latents.AudioTiming(sample_rate=d.audio_sample_rate_hz, hop_length=d.audio_hop_length)


def build_denoiser(
    model: LoadedModel, job: Job, request: Sample | Forward, guidance: Guidance
) -> tuple[AVDenoiser, list[sampling.Stream]]:
    """The model call for a request's latents and prompts (the request checked the latents)."""
    device = job.device
    positive = text_context(model, request.positive, device, "positive")
    negative = text_context(model, request.negative, device, "negative")
    video, audio = request.video, request.audio
    streams = [sampling.Stream(video, request.video_mask)]
    if audio is not None:
        streams.append(sampling.Stream(audio, request.audio_mask))
    try:
        denoiser = AVDenoiser(
            model, positive, negative, guidance, video.shape, None if audio is None else audio.shape,
            request.frame_rate, device, audio_timing(model),
        )  # fmt: skip
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    return denoiser, streams


def sample(model: LoadedModel, job: Job, request: Sample) -> dict:
    denoiser, streams = build_denoiser(model, job, request, Guidance(request.cfg_video, request.cfg_audio))
    if request.add_noise:
        noise = sampling.initial_noise(request.seed, [s.latent.shape for s in streams])
    else:
        noise = [torch.zeros_like(s.latent, dtype=torch.float32) for s in streams]
    settings = sampling.SamplerSettings(name=request.sampler, eta=request.eta, s_noise=request.s_noise)
    on_denoised, on_step = job.step_callbacks(request.preview)
    job.check_cancel()
    result = sampling.sample(
        denoiser, streams, noise, request.sigmas.float(), settings, seed=request.seed, device=job.device,
        on_step=on_step, on_denoised=on_denoised,
    )  # fmt: skip
    if job.rank == 0:
        request.out_video.copy_(result[0].to(request.out_video.dtype))
        if len(result) > 1:
            request.out_audio.copy_(result[1].to(request.out_audio.dtype))
    return {"steps": len(request.sigmas) - 1, "exchange": model.transformer.exchange.name}


def forward(model: LoadedModel, job: Job, request: Forward) -> dict:
    """One transformer forward (no CFG) at request.sigma: velocities written to out_video / out_audio
    as tokens [B, T, C]."""
    denoiser, streams = build_denoiser(model, job, request, Guidance(1.0, 1.0))
    device = job.device
    xs = [s.latent.to(device=device, dtype=torch.float32) for s in streams]
    masks = [
        None if s.noise_mask is None else s.noise_mask.to(device=device, dtype=torch.float32) for s in streams
    ]
    (_, v_out), audio = denoiser.velocity(xs, request.sigma, masks)
    if job.rank == 0:
        request.out_video.copy_(v_out.float())
        if audio is not None:
            request.out_audio.copy_(audio[1].float())
    return {"exchange": model.transformer.exchange.name}
