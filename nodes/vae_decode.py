"""Distributed VAE Decode: LATENT -> IMAGE (+ AUDIO), the video tiles decoded on every GPU of the group."""

from __future__ import annotations

import logging
import math

import torch

from ..workers.group.client import output_slot
from ..workers.group.manager import MGPUModel
from ..workers.wire import shm
from ..workers.wire.checks import check_audio_latent, check_video_latent
from ..workers.wire.model_files import read_checkpoint_config
from ..workers.wire.requests import (
    AUTO,
    DEFAULT_OVERLAP_PX,
    DEFAULT_TEMPORAL_OVERLAP_FRAMES,
    VAE_DECODE_MODES,
    TileSettings,
    VaeDecode,
)
from ..workers.wire.vae_outputs import audio_output, image_shape
from .convert import split_latent
from .job_checks import check_decode
from .jobs import run_job

log = logging.getLogger(__name__)
DECODE_MODES = VAE_DECODE_MODES
MAX_ATTENTION_CHUNK_MB = 1 << 20


def decode_latent(
    mgpu_model: MGPUModel,
    latent: dict,
    tile_size: int = AUTO,
    overlap: int = DEFAULT_OVERLAP_PX,
    temporal_size: int = AUTO,
    temporal_overlap: int = DEFAULT_TEMPORAL_OVERLAP_FRAMES,
    mode: str = DECODE_MODES[0],
    attention_chunk_mb: int = 0,
    node_id: str | None = None,
):
    """Distributed VAE Decode: (IMAGE, AUDIO or None) of `latent`, the video decoded over the group's
    GPUs. Raises ValueError naming the input to change before anything is allocated."""
    samples = latent.get("samples") if isinstance(latent, dict) else None
    if isinstance(samples, torch.Tensor) and samples.dim() == 4:
        raise ValueError(
            "the LATENT holds only audio; decode it with LTXV Audio VAE Decode, or connect the audio+video "
            "latent (LTXVConcatAVLatent) to decode both"
        )
    parts = split_latent(latent)
    settings = TileSettings(tile_size, overlap, temporal_size, temporal_overlap)
    video = parts.video.float().contiguous()
    audio = None if parts.audio is None else parts.audio.float().contiguous()
    chunk_bytes = int(attention_chunk_mb) * 2**20
    # The checks, before any allocation: the shapes, the plan's and the memory's, then the values.
    check_video_latent(video)
    if audio is not None:
        check_audio_latent(audio)
    wave = None
    if parts.audio is not None:
        # LTX-2.5's audio VAE is its own file, with the audio config in its metadata.
        audio_file = mgpu_model.audio_vae or mgpu_model.checkpoint
        wave = audio_output(read_checkpoint_config(audio_file), parts.audio.shape[2])
    image_dims = image_shape(tuple(parts.video.shape))
    wave_dims = None if wave is None else wave.shape(parts.audio.shape[0])
    check_decode(mgpu_model, video, settings, mode, 0 if wave_dims is None else 4 * math.prod(wave_dims))
    VaeDecode(video=video, audio=audio, tiles=settings, mode=mode, na_chunk_bytes=chunk_bytes)
    # Workers write into these; the job unlinks their names when it ends (NOTE [shm lifetime]).
    out_image = output_slot(image_dims, torch.float32)
    out_audio = None if wave_dims is None else output_slot(wave_dims, torch.float32)
    request = VaeDecode(
        video=video,
        audio=audio,
        tiles=settings,
        mode=mode,
        na_chunk_bytes=chunk_bytes,
        out_image=out_image,
        out_audio=out_audio,
    )
    try:
        # The tile count (the bar's length) comes with the workers' first progress report.
        results = run_job(mgpu_model, request, node_id=node_id, total=1)
    finally:  # also when the group could not even start: no segment outlives the node call
        for slot in (out_image, out_audio):
            if slot is not None:
                shm.unlink(slot.spec.name)
    first = results[0]
    log.info(
        "Distributed VAE Decode: %s decode on the %s backend (%s), %.2f s",
        first.get("mode", "tiled"),
        first.get("backend", "ltxcore"),
        first.get("plan", ""),
        max(r.get("total_s", 0.0) for r in results),
    )
    if first.get("released_for_memory"):
        log.info(
            "Distributed VAE Decode: the first try ran out of GPU memory; the workers gave back %s to make "
            "room (reloaded by the next text encode) and decoded again",
            " and ".join(first["released_for_memory"]),
        )
    audio = None
    if out_audio is not None:
        audio = {"waveform": out_audio.tensor, "sample_rate": int(results[-1]["sample_rate"])}
    return (out_image.tensor, audio)
