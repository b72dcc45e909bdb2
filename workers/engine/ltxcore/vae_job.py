"""Distributed VAE Decode and Encode on the ltx-core engine.

Decode: strategies/vae_decode.py on ltx-core's tile plan (strategies/vae_tiles.py with the rule of
vae_tiling.py); every rank decodes its tiles with ltx-core's VideoDecoder in the model's dtype. Audio:
the last rank (round-robin leaves it the fewest tiles) decodes it during the last round with ltx-core's
AudioDecoder and vocoder in float32, as ComfyUI's LTXVAudioVAEDecode does (its audio VAE works in
float32 only). Pre-faulting of the IMAGE pages: NOTE [shm prefault] in strategies/shm_prefault.py.

Encode: every rank loads ltx-core's VideoEncoder (bfloat16, or float32 with a float32 model:
`encoder_dtype`) and encodes its slab chunk by chunk (strategies/vae_encode_plan.py, vae_slab_encode.py).
Pixels are mapped as ComfyUI's VAE.process_input does (x * 2 - 1, in the IMAGE's dtype) and then cast to
the encoder's dtype; latents are written in float32, ComfyUI's intermediate dtype.

The decoders and the encoder are loaded on first use and kept in the loaded model's `extras`.
"""

from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed as dist

from ...strategies import shm_prefault
from ...strategies.decode_limits import check_decodable, check_tiles_decodable
from ...strategies.halo_exchange import HaloExchange
from ...strategies.vae_decode import TiledDecode
from ...strategies.vae_encode_plan import EncodePlan, latent_box, slab_input
from ...strategies.vae_tiles import TilePlan
from ...wire.requests import VaeDecode, VaeEncode
from ...wire.vae_outputs import image_shape
from ..protocol import InputRejected, Job
from ..vae_shared import PeakMemory, check_audio_shape
from .checkpoint import load_audio_decoder, load_video_decoder, load_video_encoder, load_vocoder
from .model import LoadedModel
from .vae_slab_encode import SlabEncoder, unsupported_reason
from .vae_tiling import ltxcore_plan

VIDEO_DECODER_KEY = "video_decoder"
AUDIO_DECODER_KEY = "audio_decoder"
VOCODER_KEY = "vocoder"
# Only for checkpoints whose decoder has timestep_conditioning (it then mixes noise into the latent):
# tile i draws it from a generator seeded DECODE_NOISE_SEED + i, so the decode does not depend on
# timing or the rank count. ComfyUI and ltx-core draw it unseeded.
DECODE_NOISE_SEED = 0
AUDIO_DTYPE = torch.float32


VIDEO_ENCODER_KEY = "video_encoder"


def video_decoder(model: LoadedModel, device: torch.device) -> torch.nn.Module:
    if VIDEO_DECODER_KEY not in model.extras:
        model.extras[VIDEO_DECODER_KEY] = load_video_decoder(model.path, device, model.dtype)
    return model.extras[VIDEO_DECODER_KEY]


def audio_modules(model: LoadedModel, device: torch.device) -> tuple[torch.nn.Module, torch.nn.Module]:
    if AUDIO_DECODER_KEY not in model.extras:
        model.extras[AUDIO_DECODER_KEY] = load_audio_decoder(model.path, device, AUDIO_DTYPE)
    if VOCODER_KEY not in model.extras:
        model.extras[VOCODER_KEY] = load_vocoder(model.path, device, AUDIO_DTYPE)
    return model.extras[AUDIO_DECODER_KEY], model.extras[VOCODER_KEY]


def encoder_dtype(model_dtype: torch.dtype) -> torch.dtype:
    """ComfyUI runs LTX-2's VAE in bfloat16 or float32 only (comfy/sd.py: working_dtypes), whatever
    the diffusion model's dtype: float32 stays, anything else encodes in bfloat16."""
    return torch.float32 if model_dtype == torch.float32 else torch.bfloat16


def video_encoder(model: LoadedModel, device: torch.device) -> torch.nn.Module:
    if VIDEO_ENCODER_KEY not in model.extras:
        model.extras[VIDEO_ENCODER_KEY] = load_video_encoder(model.path, device, encoder_dtype(model.dtype))
    return model.extras[VIDEO_ENCODER_KEY]


def validate(request: VaeDecode, world_size: int) -> TilePlan:
    """The tile plan for this group, alike on every rank before any collective (the request checked
    the latents)."""
    video, audio = request.video, request.audio
    try:
        check_decodable(tuple(video.shape))
        plan = ltxcore_plan(tuple(video.shape[2:]), request.tiles, world_size)
        check_tiles_decodable(plan)  # ltx-core's tiles; ComfyUI's engine tiles as VAEDecodeTiled does
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    out_image, out_audio = request.out_image, request.out_audio
    assert tuple(out_image.shape) == image_shape(tuple(video.shape)), "IMAGE slot of the wrong shape"
    assert out_image.dtype == torch.float32, "IMAGE slot must be float32"
    assert (out_audio is None) == (audio is None), "an audio slot goes with an audio latent"
    return plan


def _decode_audio(
    model: LoadedModel, audio: torch.Tensor, out: torch.Tensor, device: torch.device
) -> tuple[int, int, int]:
    """Decode on this rank into `out` when the shapes match; return (channels, samples, sample rate)."""
    decoder, vocoder = audio_modules(model, device)
    with torch.inference_mode():
        waveform = vocoder(decoder(audio.to(device=device, dtype=AUDIO_DTYPE)))
    if tuple(waveform.shape) == tuple(out.shape):
        out.copy_(waveform.to(device="cpu", dtype=out.dtype))
    return int(waveform.shape[1]), int(waveform.shape[-1]), int(vocoder.output_sampling_rate)


def vae_decode(model: LoadedModel, job: Job, request: VaeDecode) -> dict:
    """Distributed VAE Decode on ltx-core's tiles (collective)."""
    plan = validate(request, job.world_size)
    try:
        prefault = shm_prefault.prefault_setting(request.prefault)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    memory = PeakMemory(job.device)
    audio, out_audio = request.audio, request.out_audio
    audio_rank = job.world_size - 1
    error = None
    try:
        decoder = video_decoder(model, job.device)
        if audio is not None and job.rank == audio_rank:
            audio_modules(model, job.device)
    except ValueError as exc:
        error = f"{exc} (the Distributed VAE Decode needs the checkpoint's VAE)"
    job.agree_on_error(error)
    audio_result = (0, 0, 0)
    audio_s = 0.0

    def decode(tile_latent: torch.Tensor, tile: int) -> torch.Tensor:
        generator = None
        if decoder.timestep_conditioning:
            generator = torch.Generator(job.device).manual_seed(DECODE_NOISE_SEED + tile)
        return decoder(tile_latent, generator=generator)

    def on_round(r: int) -> None:
        nonlocal audio_result, audio_s
        if audio is not None and job.rank == audio_rank and r == plan.rounds - 1:
            start = time.perf_counter()
            audio_result = _decode_audio(model, audio, out_audio, job.device)
            audio_s = time.perf_counter() - start
        job.progress(min((r + 1) * job.world_size, plan.num_tiles), plan.num_tiles)
        job.check_cancel()

    job.check_cancel()
    start = time.perf_counter()
    runner = TiledDecode(
        plan, job.rank, job.device, model.dtype, comm_on_device=job.comm_on_device, prefault=prefault
    )
    with torch.inference_mode():
        stats = runner.run(request.video, request.out_image, decode, on_round)
    total_s = time.perf_counter() - start
    sample_rate = check_audio_shape(job, audio_result, out_audio, audio_rank) if audio is not None else None
    return {
        "backend": "ltxcore",
        "mode": "tiled",  # ltx-core's tiles (NOTE [vae tiles]); the exact mode runs on ComfyUI's engine
        "plan": plan.describe(),
        "num_tiles": plan.num_tiles,
        "total_s": round(total_s, 6),
        "audio_s": round(audio_s, 6),
        "sample_rate": sample_rate,
        **memory.read(),
        **stats.as_dict(),
    }


def vae_encode(model: LoadedModel, job: Job, request: VaeEncode, plan: EncodePlan) -> dict:
    """Distributed VAE Encode with ltx-core's VideoEncoder in slabs over `plan` (collective)."""
    memory = PeakMemory(job.device)
    error = None
    try:
        encoder = video_encoder(model, job.device)
        reason = unsupported_reason(encoder)
        if reason is not None:
            error = f"the checkpoint's video encoder cannot be split over GPUs: {reason}"
    except ValueError as exc:
        error = f"{exc} (the Distributed VAE Encode needs the checkpoint's VAE)"
    job.agree_on_error(error)
    if plan.active_ranks > 1:
        dist.barrier()  # point-to-point exchanges must not be the group's first collective (NCCL)
    active = plan.is_active(job.rank)
    exchange = HaloExchange(plan, job.rank, comm_on_device=job.comm_on_device) if active else None
    runner = SlabEncoder(encoder, exchange, streaming=len(plan.chunks) > 1) if exchange is not None else None
    pixels, out = request.pixels, request.out_latent
    encode_s = write_s = 0.0
    job.check_cancel()
    start = time.perf_counter()
    with torch.inference_mode(), runner if runner is not None else contextlib.nullcontext():
        for index, chunk in enumerate(plan.chunks):
            if runner is not None:  # a rank without a slab only joins the progress and cancel steps
                t0 = time.perf_counter()
                latent = runner.encode_chunk(
                    slab_input(pixels, plan, job.rank, chunk, job.device, encoder_dtype(model.dtype))
                )
                if job.device.type == "cuda":
                    torch.cuda.synchronize(job.device)
                t1 = time.perf_counter()
                out[latent_box(plan, job.rank, chunk)].copy_(latent.to(device="cpu", dtype=torch.float32))
                encode_s += t1 - t0
                write_s += time.perf_counter() - t1
            job.progress(index + 1, len(plan.chunks))
            job.check_cancel()
    exchange_s = 0.0 if exchange is None else exchange.seconds
    return {
        "plan": plan.describe(),
        "chunks": len(plan.chunks),
        "slab": list(plan.slabs[job.rank]) if active else None,
        "total_s": round(time.perf_counter() - start, 6),
        "encode_s": round(encode_s - exchange_s, 6),
        "exchange_s": round(exchange_s, 6),
        "write_s": round(write_s, 6),
        "bytes_sent": 0 if exchange is None else exchange.bytes_sent,
        **memory.read(),
    }
