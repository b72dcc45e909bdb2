"""The "vae_encode" command: IMAGE frames -> the normalised video latent, over the whole group.

The request: wire/requests.py VaeEncode (built by nodes/vae_encode.py, which crops as native
VAEEncode does); ranks write their slabs into its LATENT slot.

Every rank loads ltx-core's VideoEncoder (bfloat16, or float32 with a float32 model: `encoder_dtype`;
kept in the loaded model's `extras`) and encodes its slab chunk by chunk (strategies/vae_encode_plan.py,
strategies/vae_encode.py). Pixels are mapped as ComfyUI's VAE.process_input does (x * 2 - 1, in the
IMAGE's dtype) and then cast to the encoder's dtype; latents are written in float32, ComfyUI's
intermediate dtype.
"""

from __future__ import annotations

import contextlib
import time

import torch
import torch.distributed as dist

from ..engine.comfy.model import ComfyModel
from ..engine.ltxcore.checkpoint import load_video_encoder
from ..engine.ltxcore.model import LoadedModel
from ..strategies.vae_encode import HaloExchange, SlabEncoder, unsupported_reason
from ..strategies.vae_encode_plan import EncodePlan, make_plan
from ..wire.requests import VaeEncode
from ..wire.vae_outputs import encoded_latent_shape as latent_shape
from .ops import InputRejected, op
from .ops_sampling import loaded_model
from .ops_vae import PeakMemory, agree_on_error

VIDEO_ENCODER_KEY = "video_encoder"


def encoder_dtype(model_dtype: torch.dtype) -> torch.dtype:
    """ComfyUI runs LTX-2's VAE in bfloat16 or float32 only (comfy/sd.py: working_dtypes), whatever
    the diffusion model's dtype: float32 stays, anything else encodes in bfloat16."""
    return torch.float32 if model_dtype == torch.float32 else torch.bfloat16


def video_encoder(model: LoadedModel, device: torch.device) -> torch.nn.Module:
    if VIDEO_ENCODER_KEY not in model.extras:
        model.extras[VIDEO_ENCODER_KEY] = load_video_encoder(model.path, device, encoder_dtype(model.dtype))
    return model.extras[VIDEO_ENCODER_KEY]


def validate(request: VaeEncode, world_size: int) -> EncodePlan:
    """The band plan for this group, alike on every rank before any collective (the request checked
    the pixels)."""
    pixels, out = request.pixels, request.out_latent
    try:
        plan = make_plan(latent_shape(tuple(pixels.shape))[2:], world_size, request.temporal_frames)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    assert tuple(out.shape) == latent_shape(tuple(pixels.shape)), "LATENT slot of the wrong shape"
    assert out.dtype == torch.float32, "LATENT slot must be float32"
    return plan


def slab_input(
    pixels: torch.Tensor, plan: EncodePlan, rank: int, chunk: tuple[int, int], device: torch.device, dtype
) -> torch.Tensor:
    """IMAGE values [frames, H, W, 3] -> this rank's part of a chunk [1, 3, f, h, w] in [-1, 1], as
    ComfyUI's VAE.process_input maps them (x * 2 - 1 in the IMAGE's dtype), then in `dtype`."""
    box = [slice(*chunk), slice(None), slice(None)]
    box[plan.axis_dim - 2] = plan.pixel_slab(rank)  # [F, H, W] of the IMAGE: the slab axis less 2
    piece = pixels[tuple(box)].to(device)
    return (piece * 2.0 - 1.0).to(dtype).permute(3, 0, 1, 2).unsqueeze(0).contiguous()


@op(VaeEncode)
def vae_encode(job, request: VaeEncode) -> dict:
    rt = job.runtime
    comfy_model = rt.state.get("model")
    if isinstance(comfy_model, ComfyModel):  # before loaded_model, which accepts ltx-core's only
        from .comfy_vae import vae_encode_comfy  # imports ComfyUI's VAE code: only on the comfy backend

        return vae_encode_comfy(job, comfy_model, request)
    model = loaded_model(job)
    plan = validate(request, job.world_size)
    memory = PeakMemory(rt.device)
    error = None
    try:
        encoder = video_encoder(model, rt.device)
        reason = unsupported_reason(encoder)
        if reason is not None:
            error = f"the checkpoint's video encoder cannot be split over GPUs: {reason}"
    except ValueError as exc:
        error = f"{exc} (the Distributed VAE Encode needs the checkpoint's VAE)"
    agree_on_error(job, error)
    if plan.active_ranks > 1:
        dist.barrier()  # point-to-point exchanges must not be the group's first collective (NCCL)
    active = plan.is_active(job.rank)
    exchange = HaloExchange(plan, job.rank, comm_on_device=rt.backend == "nccl") if active else None
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
                    slab_input(pixels, plan, job.rank, chunk, rt.device, encoder_dtype(model.dtype))
                )
                if rt.device.type == "cuda":
                    torch.cuda.synchronize(rt.device)
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


def latent_box(plan: EncodePlan, rank: int, chunk: tuple[int, int]) -> tuple[slice, ...]:
    """Where `rank`'s latent of `chunk` goes in the LATENT [1, 128, F, h, w]."""
    box = [slice(None), slice(None), plan.latent_frames(chunk), slice(None), slice(None)]
    box[plan.axis_dim] = plan.latent_slab(rank)
    return tuple(box)
