"""In-process references for parity tests: the same checkpoint run in this process, one rank, no workers."""

from __future__ import annotations

from pathlib import Path

import torch

from ltx2_mgpu.workers import latents, sampling
from ltx2_mgpu.workers.conditioning import context_from_features
from ltx2_mgpu.workers.engine import AVDenoiser, Guidance, LoadedModel
from ltx2_mgpu.workers.model_forward import ForwardMode


class _OneRank:
    name, rank, world_size = "none", 0, 1


def load_in_process(path: Path, mode: ForwardMode = ForwardMode.COMFYUI) -> LoadedModel:
    return LoadedModel.load(path, torch.device("cpu"), torch.float32, _OneRank(), mode)


def denoiser(
    model: LoadedModel, video, audio, positive, negative, cfg_video, cfg_audio, frame_rate=25.0
) -> AVDenoiser:
    """`positive` / `negative`: CONDITIONING lists as ComfyUI gives them (unprocessed features)."""
    cpu = torch.device("cpu")
    pos = context_from_features(positive[0][0], model.processor, cpu, torch.float32)
    neg = (
        None
        if negative is None
        else context_from_features(negative[0][0], model.processor, cpu, torch.float32)
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
        torch.device("cpu"),
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
) -> list[torch.Tensor]:
    cfg_audio = cfg if cfg_audio is None else cfg_audio
    den = denoiser(model, video, audio, positive, negative, cfg, cfg_audio)
    streams = [sampling.Stream(video, video_mask)] + ([] if audio is None else [sampling.Stream(audio, None)])
    noise = sampling.initial_noise(seed, [s.latent.shape for s in streams])
    with torch.inference_mode():
        return sampling.sample(
            den,
            streams,
            noise,
            sigmas,
            sampling.SamplerSettings(sampler),
            seed=seed,
            device=torch.device("cpu"),
        )


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())
