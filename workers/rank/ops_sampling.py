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
from ..strategies.sequence_parallel import check_splittable
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
    model: LoadedModel, cond: dict | None, device: torch.device, what: str
) -> TextContext | None:
    """Conditioning as sent by the client: {"tensor": [B,T,W], "unprocessed": bool}."""
    if cond is None:
        return None
    tensor, unprocessed = cond["tensor"], bool(cond["unprocessed"])
    try:
        check_conditioning_width(tensor, unprocessed, model.description, what)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    with torch.inference_mode():
        if unprocessed:
            return context_from_features(tensor, model.processor, device, model.dtype)
        return context_from_processed(tensor, device, model.dtype)


def validate_streams(args: dict, max_video_tokens: int, world_size: int) -> None:
    """Everything a user can get wrong, checked alike on every rank before any collective."""
    try:
        latents.check_video_latent(args["video"])
        if args.get("audio") is not None:
            latents.check_audio_latent(args["audio"])
            if args["audio"].shape[0] != args["video"].shape[0]:
                raise ValueError(
                    "the audio and video latents have different batch sizes; build them with the same batch"
                )
        sampling.validate_sigmas(args["sigmas"])
        if args["sampler"] not in sampling.SAMPLERS:
            raise ValueError(
                f"sampler {args['sampler']!r} is not supported; choose one of {', '.join(sampling.SAMPLERS)}"
            )
        for key in ("video", "audio"):
            t = args.get(key)
            if t is not None and not torch.isfinite(t).all():
                raise ValueError(
                    f"the input {key} latent holds NaN or infinite values; re-create it upstream"
                )
        _, _, f, h, w = args["video"].shape
        tokens = f * h * w
        if tokens > max_video_tokens:
            raise ValueError(
                f"the video latent has {tokens:,} tokens ({f} x {h} x {w} latent cells), over the limit of "
                f"{max_video_tokens:,}. Lower the resolution or the frame count (or raise max tokens if memory allows)."
            )
        check_splittable((f, h, w), world_size)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc


def build_denoiser(job, args: dict, guidance: Guidance) -> tuple[AVDenoiser, list[sampling.Stream]]:
    """Validate the job's inputs (alike on every rank) and build the model call for them."""
    model = loaded_model(job)
    validate_streams(args, int(args.get("max_video_tokens", 32768)), job.world_size)
    device = job.runtime.device
    positive = text_context(model, args["positive"], device, "positive")
    negative = text_context(model, args.get("negative"), device, "negative")
    video, audio = args["video"], args.get("audio")
    streams = [sampling.Stream(video, args.get("video_mask"))]
    if audio is not None:
        streams.append(sampling.Stream(audio, args.get("audio_mask")))
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
            float(args["frame_rate"]),
            device,
            timing,
        )
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    return denoiser, streams


@op("sample")
def sample(job, args: dict) -> dict:
    rt = job.runtime
    if is_comfy_model(rt.state.get("model")):
        return sample_comfy(job, args)
    denoiser, streams = build_denoiser(
        job, args, Guidance(float(args["cfg_video"]), float(args["cfg_audio"]))
    )
    seed = int(args["seed"])
    if args.get("add_noise", True):
        noise = sampling.initial_noise(seed, [s.latent.shape for s in streams])
    else:
        noise = [torch.zeros_like(s.latent, dtype=torch.float32) for s in streams]
    settings = sampling.SamplerSettings(
        name=str(args["sampler"]), eta=float(args.get("eta", 1.0)), s_noise=float(args.get("s_noise", 1.0))
    )

    on_denoised, on_step = step_callbacks(job, bool(args.get("preview")))

    job.check_cancel()
    result = sampling.sample(
        denoiser,
        streams,
        noise,
        args["sigmas"].float(),
        settings,
        seed=seed,
        device=rt.device,
        on_step=on_step,
        on_denoised=on_denoised,
    )
    if rt.rank == 0:
        args["out_video"].copy_(result[0].to(args["out_video"].dtype))
        if len(result) > 1:
            args["out_audio"].copy_(result[1].to(args["out_audio"].dtype))
    return {"steps": len(args["sigmas"]) - 1, "exchange": getattr(rt.state.get("exchange"), "name", "none")}


@op("forward")
def forward(job, args: dict) -> dict:
    """One transformer forward (no CFG) at args["sigma"]: velocities written to out_video / out_audio
    as tokens [B, T, C]. For parity tests and benchmarks."""
    args = {**args, "sigmas": torch.tensor([float(args["sigma"]), 0.0]), "sampler": "euler"}
    denoiser, streams = build_denoiser(job, args, Guidance(1.0, 1.0))
    device = job.runtime.device
    xs = [s.latent.to(device=device, dtype=torch.float32) for s in streams]
    masks = [
        None if s.noise_mask is None else s.noise_mask.to(device=device, dtype=torch.float32) for s in streams
    ]
    (_, v_out), audio = denoiser.velocity(xs, float(args["sigma"]), masks)
    if job.rank == 0:
        args["out_video"].copy_(v_out.float())
        if audio is not None:
            args["out_audio"].copy_(audio[1].float())
    return {"exchange": getattr(job.runtime.state.get("exchange"), "name", "none")}
