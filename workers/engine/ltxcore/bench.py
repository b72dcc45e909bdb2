"""Benchmark commands on the ltx-core engine: the real 19B transformer shape with random weights, and
timed model calls.

Real LTX-2 weights cannot be downloaded where we measure, so benchmarks build the released 19B
configuration (48 layers, 32 x 128 video heads, 32 x 64 audio heads) with random bf16 weights on
the worker's GPU. Timing runs inside the worker with device events, so it measures the engine's model
call (positions, timesteps, CFG batch, the SP wrapper, the forward) and not the control channel.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from ltx_core.model.transformer.model_configurator import LTXModelConfigurator

from ...wire.checks import DTYPES, ForwardMode
from ...wire.constants import AUDIO_LATENT_CHANNELS, AUDIO_LATENT_MEL_BINS
from ...wire.model_files import describe_config
from ...wire.requests import BenchForward, LoadRandomModel
from ..protocol import Job
from . import latents
from .conditioning import context_from_processed
from .fp8_linear import Fp8Linear, Fp8Selection, matmul_path, quantize_linears
from .model import AVDenoiser, Guidance, LoadedModel
from .model_forward import apply_mode_to_modules
from .sequence_parallel import SequenceParallelModel

INIT_STD = 0.02  # ltx-core's own init scale; timing does not depend on the values


def random_transformer(full: dict, device: torch.device, dtype: torch.dtype, seed: int) -> torch.nn.Module:
    """LTXModel of the complete transformer config `full` with N(0, INIT_STD) weights, built straight on
    `device` in `dtype`."""
    with torch.device("meta"):
        model = LTXModelConfigurator.from_config({"transformer": full})
    model = model.to(dtype=dtype).to_empty(device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, INIT_STD, generator=generator)
    return model.eval()


def run_bench(engine, job: Job, request, full_config: dict | None) -> dict:
    """The ltx-core engine's benchmark commands (Engine.bench)."""
    if isinstance(request, LoadRandomModel):
        engine.unload()
        engine.model, reply = load_random_model(job, request, full_config)
        return reply
    if isinstance(request, BenchForward):
        return bench_forward(engine.loaded(), job, request)
    raise engine.refuse(f"the benchmark command {request.OP!r}")


def load_random_model(job: Job, request: LoadRandomModel, full_config: dict) -> tuple[LoadedModel, dict]:
    """A random-weight model of the complete transformer config `full_config` (the handler fills the
    request's keys in over the tiny model's full key set; default: the 19B shape).
    request.fp8_matmul: quantize the Linears the released fp8 files quantize (fp8_linear.py) before
    wrapping; the reply then tells how many ("fp8_linears"), the weights' bytes and the matmul path."""
    dtype = DTYPES[request.dtype]
    mode = ForwardMode(request.mode)
    if job.device.type == "cuda":
        torch.cuda.empty_cache()
    transformer = random_transformer(full_config, job.device, dtype, request.seed)
    fp8_linears = 0
    if request.fp8_matmul:
        fp8_linears = quantize_linears(
            transformer, Fp8Selection.released(len(transformer.transformer_blocks))
        )
        if job.device.type == "cuda":  # bench_forward's peak: not the bf16 weights quantization freed
            torch.cuda.reset_peak_memory_stats(job.device)
    apply_mode_to_modules(transformer, mode)
    description = describe_config({"transformer": full_config})
    exchange = job.head_exchange()
    model = LoadedModel(
        path=Path("<random>"),
        dtype=dtype,
        mode=mode,
        description=description,
        causal_positions=True,
        transformer=SequenceParallelModel(transformer, exchange, mode),
        processor=torch.nn.Identity(),
    )
    params = sum(p.numel() for p in transformer.parameters())
    params += sum(m.weight.numel() for m in transformer.modules() if isinstance(m, Fp8Linear))
    result = {"parameters": params, "exchange": exchange.name}
    if request.fp8_matmul:
        tensors = [*transformer.parameters(), *transformer.buffers()]  # fp8 weights are buffers
        path = matmul_path(job.device)
        result.update(fp8_linears=fp8_linears, parameter_bytes=sum(t.numel() * t.element_size() for t in tensors),
                      fp8_path=path.name, fp8_path_reason=path.reason)  # fmt: skip
    return model, result


def bench_forward(model: LoadedModel, job: Job, request: BenchForward) -> dict:
    """Time `repeats` model calls (cond+uncond batch) on a video of request.video_shape (+ audio)."""
    device, dtype = job.device, model.dtype
    d = model.description
    video_shape = torch.Size(request.video_shape)
    audio_shape = (
        None
        if request.audio_frames is None
        else torch.Size((video_shape[0], AUDIO_LATENT_CHANNELS, request.audio_frames, AUDIO_LATENT_MEL_BINS))
    )
    g = torch.Generator().manual_seed(request.seed)
    context = torch.randn(1, 1024, 2 * d.caption_channels, generator=g)
    text = context_from_processed(context, device, dtype)
    timing = latents.AudioTiming(sample_rate=d.audio_sample_rate_hz, hop_length=d.audio_hop_length)
    denoiser = AVDenoiser(
        model, text, text, Guidance(4.0, 4.0), video_shape, audio_shape, 24.0, device, timing
    )
    xs = [torch.randn(video_shape, generator=g).to(device)]
    if audio_shape is not None:
        xs.append(torch.randn(audio_shape, generator=g).to(device))
    masks = [None] * len(xs)
    # The same Modality the engine builds, for a plain ltx-core LTXModel.forward timed alongside it.
    video_in = denoiser._modality(
        latents.video_to_tokens(xs[0]), 0.7, None, denoiser.video_positions, denoiser.video_context, dtype
    )
    audio_in = None
    if audio_shape is not None:
        audio_in = denoiser._modality(
            latents.audio_to_tokens(xs[1]), 0.7, None, denoiser.audio_positions, denoiser.audio_context, dtype
        )
    plain = model.transformer.model
    calls = {"engine": lambda: denoiser(xs, 0.7, masks)}
    if request.compare_plain:
        calls["plain_ltx_core"] = lambda: plain(video_in, audio_in, None)
    times: dict[str, list[float]] = {name: [] for name in calls}
    warmup_ms: list[float] = []  # the engine's warm-up calls: the first one compiles when compile is on
    warmup = request.warmup
    for i in range(warmup + request.repeats):
        for name, call in calls.items():  # interleaved, so clocks and temperature affect both alike
            start = time.perf_counter()
            with torch.inference_mode():
                call()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= warmup:
                times[name].append((time.perf_counter() - start) * 1e3)
            elif name == "engine":
                warmup_ms.append((time.perf_counter() - start) * 1e3)
        job.check_cancel()
    times_ms = times["engine"]
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    breakdown = kernel_breakdown(calls["engine"]) if request.profile and device.type == "cuda" else {}
    return {
        "kernel_ms": breakdown,
        "times_ms": times_ms,
        "warmup_ms": warmup_ms,
        "plain_in_worker_ms": times.get("plain_ltx_core", []),
        "peak_memory_bytes": int(peak),
        "tokens": int(video_shape[2] * video_shape[3] * video_shape[4]),
    }


# Kernel-name fragments per category (profiler names of cuBLAS/cuDNN/flash/our exchange kernels).
KERNEL_CATEGORIES = {
    "exchange": ("exchange_kernel", "nccl"),
    "attention": ("flash", "fmha", "cudnn", "attention", "sdpa"),
    "matmul": ("gemm", "xmma", "cutlass", "nvjet", "matmul", "_mm"),
}


def kernel_breakdown(call) -> dict[str, float]:
    """GPU kernel time of one call by category (ms): how much an exchange/compute overlap could save."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.inference_mode():
        call()
        torch.cuda.synchronize()
    totals = dict.fromkeys((*KERNEL_CATEGORIES, "other"), 0.0)
    for event in prof.key_averages():
        us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0.0)
        if event.device_type != torch.autograd.DeviceType.CUDA or not us:
            continue
        name = event.key.lower()
        kind = next((k for k, frags in KERNEL_CATEGORIES.items() if any(f in name for f in frags)), "other")
        totals[kind] += us / 1e3
    return totals
