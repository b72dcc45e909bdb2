"""Single-process runs with no worker group: the reference that parity checks compare against
(the demo's check, the tests). Same engine code path as one rank, in the calling process, on the CPU."""

from __future__ import annotations

from pathlib import Path

import torch

from . import latents, sampling
from .conditioning import context_from_features
from .model import AVDenoiser, Guidance, LoadedModel
from .model_forward import ForwardMode

CPU = torch.device("cpu")


class _OneRank:
    name, rank, world_size = "none", 0, 1


def load_in_process(path: Path | str, mode: ForwardMode = ForwardMode.COMFYUI) -> LoadedModel:
    return LoadedModel.load(Path(path), CPU, torch.float32, _OneRank(), mode)


def denoiser(
    model: LoadedModel, video, audio, positive, negative, cfg_video, cfg_audio, frame_rate: float = 25.0
) -> AVDenoiser:
    """`positive` / `negative`: CONDITIONING lists as ComfyUI gives them (unprocessed features)."""
    pos = context_from_features(positive[0][0], model.processor, CPU, model.dtype)
    neg = (
        None if negative is None else context_from_features(negative[0][0], model.processor, CPU, model.dtype)
    )
    d = model.description
    timing = latents.AudioTiming(sample_rate=d.audio_sample_rate_hz, hop_length=d.audio_hop_length)
    return AVDenoiser(
        model,
        pos,
        neg,
        Guidance(cfg_video, cfg_audio),
        video.shape,
        None if audio is None else audio.shape,
        frame_rate,
        CPU,
        timing,
    )


def sample_in_process(
    model: LoadedModel,
    video,
    audio,
    video_mask,
    positive,
    negative,
    sigmas,
    sampler: str,
    cfg: float,
    seed: int,
    cfg_audio: float | None = None,
    frame_rate: float = 25.0,
) -> list[torch.Tensor]:
    """The SP Sampler's job on one process: final latents per stream (video, then audio)."""
    cfg_audio = cfg if cfg_audio is None else cfg_audio
    den = denoiser(model, video, audio, positive, negative, cfg, cfg_audio, frame_rate)
    streams = [sampling.Stream(video, video_mask)] + ([] if audio is None else [sampling.Stream(audio, None)])
    noise = sampling.initial_noise(seed, [s.latent.shape for s in streams])
    with torch.inference_mode():
        return sampling.sample(
            den, streams, noise, sigmas, sampling.SamplerSettings(sampler), seed=seed, device=CPU
        )


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b|: the parity measure used throughout (issue: at most 1e-5 in fp32)."""
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))
