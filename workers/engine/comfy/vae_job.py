"""The "vae_decode" and "vae_encode" commands on ComfyUI's engine: ComfyUI's own VAE objects in the ranks.

The rank's handlers (rank/ops_vae.py, ops_vae_encode.py) hand their request (wire/requests.py VaeDecode,
VaeEncode; the encode with its plan) to the engine, which runs it here. Imported lazily: it imports
ComfyUI's VAE modules, which exist in a rank only after bootstrap.import_comfyui.

Decode modes (VaeDecode.mode):
- "exact" (default): VAEDecode's frames. The frame is cut into slabs and each rank decodes its rows,
  swapping edge rows with its neighbours at every convolution (vae_slab_decode.py); for
  LTX-2.5's diffusion decoder, at every neighbourhood attention (na_decode.py, its
  memory per rank bounded by VaeDecode.na_chunk_bytes, 0 = the whole band at once).
- "tiled": VAEDecodeTiled's frames for the node's four tile settings (vae_tiled.py).
Audio: the last rank decodes it with ComfyUI's audio VAE, as LTXVAudioVAEDecode does
(engine/comfy/audio_vae.py), kept in the model's `extras`.
Encode: VAEEncode's latent, in slabs with edge rows swapped (vae_slab_encode.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from ...strategies import shm_prefault
from ...strategies.decode_limits import NO_PADDING, check_decodable
from ...strategies.halo_exchange import HaloExchange
from ...strategies.na_bands import band_plan
from ...strategies.native_tiles import check_native_tiles, num_tiles
from ...strategies.vae_decode import STAGING_BYTES, copy_through, to_image
from ...strategies.vae_encode_plan import EncodePlan, latent_box, slab_input, split_evenly
from ...wire.requests import VAE_DECODE_MODES, TileSettings, VaeDecode, VaeEncode
from ..memory_room import with_room
from ..protocol import InputRejected, Job
from ..units import UnitSteps
from ..vae_shared import PeakMemory, check_audio_shape
from .audio_vae import decode_audio, load_audio_vae
from .model import ComfyModel, load_vae_file
from .na_decode import BandGather, BandNADecoder, is_diffusion_decoder, pixel_scale
from .vae_halo import unsupported_reason
from .vae_slab_decode import SlabDecoder, decode_plan, describe_slabs, padding_mode
from .vae_slab_encode import SlabEncoder
from .vae_tiled import check_tiled, decode_tiled, tiled_decode_args

EXACT, TILED = VAE_DECODE_MODES
AUDIO_VAE_KEY = "comfy_audio_vae"
CPU = torch.device("cpu")


def _checkpoint_vae(model: ComfyModel) -> tuple[object, float]:
    """(the checkpoint's VAE, seconds spent making it ready: its load on first use, then ~0)."""
    start = time.perf_counter()
    try:
        return model.checkpoint_vae(), round(time.perf_counter() - start, 6)  # loaded on first use, then kept
    except ValueError as exc:  # the same file on every rank: refused alike everywhere
        raise InputRejected(str(exc)) from exc


def _validate_decode(request: VaeDecode, vae) -> str:
    """What depends on the checkpoint's VAE, alike on every rank, before any work (the request checked
    the latents and the mode). Returns the mode."""
    mode = request.mode
    try:
        decoder = vae.first_stage_model.decoder
        diffusion = is_diffusion_decoder(decoder)
        padding = NO_PADDING if diffusion else padding_mode(decoder)
        check_decodable(tuple(request.video.shape), padding)
        if mode == TILED:
            latent_fhw = tuple(request.video.shape[2:])
            check_native_tiles(latent_fhw, request.tiles, padding, tiled_decode_args(vae, request.tiles))
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    if mode == EXACT:
        reason = None if diffusion else unsupported_reason(decoder)
    else:
        reason = check_tiled(vae)
    if reason is not None:
        other = TILED if mode == EXACT else EXACT
        raise InputRejected(
            f"the {mode} decode cannot run this checkpoint's VAE over the group: {reason}. Set mode to {other}"
        )
    return mode


class _ImageWriter:
    """write(first frame, pixels) for a decoder walk (vae_slab_decode.WriteFn): this rank's rows or
    columns `band` of every frame into the shared IMAGE viewed as [B, frames, H, W, 3], mapped as
    VAE.process_output maps them. `dim`: the band axis in a [B, C, F, H, W] tensor (3 or 4)."""

    def __init__(
        self, image5: torch.Tensor, dim: int, band: slice, on_written: Callable[[int], None] | None = None
    ) -> None:
        self.image5 = image5
        self.box = [slice(None)] * 5
        self.box[dim - 1] = band  # [B, frames, H, W, 3]: the band axis less 1
        self.staging = None  # pinned, reused for every device-to-host write (see vae_decode.STAGING_BYTES)
        self.seconds = 0.0
        self.on_written = on_written  # (frames written so far): the progress bar

    def __call__(self, first: int, pixels: torch.Tensor) -> None:
        start = time.perf_counter()
        values = to_image(pixels).permute(0, 2, 3, 4, 1)
        self.box[1] = slice(first, first + values.shape[1])
        if values.device.type == "cpu":
            self.image5[tuple(self.box)].copy_(values)
        else:
            numel = max(STAGING_BYTES // values.element_size(), values[0, 0].numel())
            if self.staging is None or self.staging.numel() < numel:
                self.staging = torch.empty(numel, dtype=values.dtype, pin_memory=True)
            copy_through(self.image5[tuple(self.box)], values.contiguous(), self.staging)
        self.seconds += time.perf_counter() - start
        if self.on_written is not None:
            self.on_written(first + values.shape[1])


def _decode_exact(job, vae, video: torch.Tensor, image5: torch.Tensor) -> dict:
    plan = decode_plan(tuple(video.shape[2:]), job.world_size, padding_mode(vae.first_stage_model.decoder))
    if plan.active_ranks > 1:
        dist.barrier()  # point-to-point exchanges must not be the group's first collective (NCCL)
    units = UnitSteps(job)
    write_s = 0.0
    if plan.is_active(job.rank):
        frames = image5.shape[1]
        write = _ImageWriter(
            image5, plan.axis_dim, plan.pixel_slab(job.rank), lambda done: job.progress(done, frames)
        )
        exchange = HaloExchange(plan, job.rank, comm_on_device=job.comm_on_device)
        decoder = SlabDecoder(vae, plan, job.rank, exchange, on_unit=units.step)
        decoder.run(video, write)
        units.finish()
        exchange_s, sent, write_s = exchange.seconds, exchange.bytes_sent, write.seconds
    else:
        units.idle()
        exchange_s, sent = 0.0, 0
    return {
        "plan": describe_slabs(plan),
        "exchange_s": round(exchange_s, 6),
        "write_s": round(write_s, 6),
        "bytes_sent": sent,
        "units": units.units,
    }


def _decode_diffusion(job, vae, video: torch.Tensor, image5: torch.Tensor, chunk_bytes: int) -> dict:
    """Exact mode for LTX-2.5's diffusion decoder (na_decode.py)."""
    plan = band_plan(tuple(video.shape[2:]), job.world_size, chunk_bytes)
    if plan.active_ranks > 1:
        dist.barrier()  # point-to-point exchanges must not be the group's first collective (NCCL)
    stats = {"plan": f"diffusion decoder: {plan.describe()}", "exchange_s": 0.0, "write_s": 0.0}
    stats.update(bytes_sent=0, exchanges=0)
    units = UnitSteps(job)
    if plan.is_active(job.rank):
        scale = pixel_scale(vae.first_stage_model.decoder)
        start, stop = plan.bands[job.rank]
        write = _ImageWriter(image5, plan.dim + 1, slice(start * scale, stop * scale))
        gather = BandGather(plan, job.rank, comm_on_device=job.comm_on_device)
        decoder = BandNADecoder(vae, plan, job.rank, gather)

        def on_unit() -> None:
            job.progress(decoder.units, decoder.num_units)
            units.step()

        decoder.on_unit = on_unit
        decoder.run(video, write)
        units.finish()
        stats.update(exchange_s=round(gather.seconds, 6), write_s=round(write.seconds, 6))
        stats.update(bytes_sent=gather.bytes_sent, exchanges=gather.exchanges)
    else:
        units.idle()
    stats["units"] = units.units
    return stats


def _decode_tiled(job, vae, video: torch.Tensor, image5: torch.Tensor, tiles: TileSettings) -> dict:
    args = tiled_decode_args(vae, tiles)
    try:
        total = num_tiles(tuple(video.shape[2:]), args)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    output_device = job.device if job.comm_on_device else CPU
    flat = image5.view(-1, *image5.shape[2:])
    first, stop = split_evenly(flat.shape[0], job.world_size)[job.rank]
    units = UnitSteps(job)

    def on_round(done: int, of: int) -> None:
        job.progress(done, of)
        units.step()

    def on_error(message: str) -> None:  # raised alike on every rank at the next boundary
        units.fail(
            f"Distributed VAE Decode, tiled mode: {message}. Set tile_size to 0 (auto) or another size, "
            "or mode to exact"
        )

    # NOTE [shm prefault]: this rank's frames of the fresh IMAGE fault in while the tiles decode.
    prefaulting = shm_prefault.prefault_in_background([flat[first:stop]])
    try:
        frames, decoded = decode_tiled(
            vae, video, args, job.rank, job.world_size, output_device, total, on_round, on_error,
            units.cancel_requested,
        )  # fmt: skip
    finally:  # a cancel or an error: the thread must not touch the IMAGE after the job
        if prefaulting is not None:
            prefaulting.join()
    start = time.perf_counter()
    mine = frames.movedim(1, -1).reshape(flat.shape)[first:stop]
    if mine.device.type == "cpu":
        flat[first:stop].copy_(mine)
    else:  # through a pinned buffer: a pageable device-to-host copy of 1.3 GB ran at 0.9 GB/s on an H200
        staging = torch.empty(
            max(STAGING_BYTES // mine.element_size(), mine[0].numel()), dtype=mine.dtype, pin_memory=True
        )
        copy_through(flat[first:stop].unsqueeze(0), mine.contiguous().unsqueeze(0), staging)
    return {
        "plan": args.describe(),
        "tiles": decoded,
        "units": units.units,
        "write_s": round(time.perf_counter() - start, 6),
    }


def _audio_vae(model: ComfyModel, device: torch.device):
    if AUDIO_VAE_KEY not in model.extras and model.vae_files.audio is not None:
        # A separate audio VAE file, as VAELoader loads it (the LTX-2.5 template's second VAELoader).
        model.extras[AUDIO_VAE_KEY] = load_vae_file(model.vae_files.audio, device)
    elif AUDIO_VAE_KEY not in model.extras:
        model.extras[AUDIO_VAE_KEY] = load_audio_vae(model.path, device)
    return model.extras[AUDIO_VAE_KEY]


def release_text_encoders(job: Job, model: ComfyModel) -> list[str]:
    """The rank's resident text encoders dropped (Gemma 3 in the rank's state, Gemma 4 in the model's
    extras): NOTE [memory room]. Alike on every rank."""
    from .gemma4_job import GEMMA4_KEY

    released = job.release_text_encoder()
    if model.extras.pop(GEMMA4_KEY, None) is not None:
        released.append("the Gemma 4 text encoder")
    return released


def vae_decode_comfy(job, model: ComfyModel, request: VaeDecode) -> dict:
    """Distributed VAE Decode on ComfyUI's engine (collective)."""
    vae, vae_load_s = _checkpoint_vae(model)
    mode = _validate_decode(request, vae)
    video, audio, out_audio = request.video, request.audio, request.out_audio
    audio_rank = job.world_size - 1
    error = None
    if audio is not None and job.rank == audio_rank:
        try:
            _audio_vae(model, job.device)
        except ValueError as exc:
            error = str(exc)
    job.agree_on_error(error)
    memory = PeakMemory(job.device)
    job.check_cancel()
    start = time.perf_counter()
    batch = video.shape[0]
    image5 = request.out_image.view(batch, -1, *request.out_image.shape[1:])

    def decode() -> dict:
        if mode == EXACT and is_diffusion_decoder(vae.first_stage_model.decoder):
            return _decode_diffusion(job, vae, video, image5, request.na_chunk_bytes)
        if mode == EXACT:
            return _decode_exact(job, vae, video, image5)
        return _decode_tiled(job, vae, video, image5, request.tiles)

    with torch.inference_mode():
        # NOTE [memory room]: out of device memory, the resident text encoders go and the decode runs again.
        stats, released = with_room(decode, lambda: release_text_encoders(job, model), job.device)
        video_s = time.perf_counter() - start
        audio_shape, audio_s = (0, 0, 0), 0.0
        if audio is not None and job.rank == audio_rank:
            t0 = time.perf_counter()
            waveform, rate = decode_audio(_audio_vae(model, job.device), audio)
            if tuple(waveform.shape) == tuple(out_audio.shape):
                out_audio.copy_(waveform)
            audio_shape, audio_s = (waveform.shape[1], waveform.shape[2], rate), time.perf_counter() - t0
    sample_rate = (
        check_audio_shape(job, audio_shape, out_audio, audio_rank, "ComfyUI's audio VAE")
        if audio is not None
        else None
    )
    job.progress(1, 1)
    job.check_cancel()
    return {
        "backend": "comfy",
        "mode": mode,
        "vae_load_s": vae_load_s,
        "total_s": round(time.perf_counter() - start, 6),
        "video_s": round(video_s, 6),
        "audio_s": round(audio_s, 6),
        "sample_rate": sample_rate,
        "released_for_memory": released,
        **stats,
        **memory.read(),
    }


def vae_encode_comfy(job: Job, model: ComfyModel, request: VaeEncode, plan: EncodePlan) -> dict:
    """Distributed VAE Encode on ComfyUI's engine, in slabs over `plan` (collective)."""
    vae, vae_load_s = _checkpoint_vae(model)
    reason = unsupported_reason(vae.first_stage_model.encoder)
    if reason is not None:
        raise InputRejected(f"the checkpoint's video encoder cannot be split over GPUs: {reason}")
    memory = PeakMemory(job.device)
    if plan.active_ranks > 1:
        dist.barrier()  # point-to-point exchanges must not be the group's first collective (NCCL)
    pixels, out = request.pixels, request.out_latent
    job.check_cancel()
    start = time.perf_counter()
    exchange_s, sent = 0.0, 0
    units = UnitSteps(job)
    if plan.is_active(job.rank):
        whole = (0, pixels.shape[0])
        exchange = HaloExchange(plan, job.rank, comm_on_device=job.comm_on_device)
        with torch.inference_mode():
            slab = slab_input(pixels, plan, job.rank, whole, CPU, vae.vae_dtype)
            encoder = SlabEncoder(vae, plan, job.rank, exchange, on_unit=units.step)
            latent = encoder.run(slab, on_chunk=job.progress)
            del slab
            out[latent_box(plan, job.rank, whole)].copy_(latent.to(device=CPU, dtype=torch.float32))
        units.finish()
        exchange_s, sent = exchange.seconds, exchange.bytes_sent
    else:
        units.idle()
    job.check_cancel()
    return {
        "backend": "comfy",
        "plan": describe_slabs(plan),
        "slab": list(plan.slabs[job.rank]) if plan.is_active(job.rank) else None,
        "vae_load_s": vae_load_s,
        "total_s": round(time.perf_counter() - start, 6),
        "exchange_s": round(exchange_s, 6),
        "bytes_sent": sent,
        "units": units.units,
        **memory.read(),
    }
