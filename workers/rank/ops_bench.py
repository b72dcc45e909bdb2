"""Benchmark commands: the real 19B transformer shape with random weights, and timed model calls.

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

from ..embedded.tiny_model import tiny_checkpoint_config
from ..engine.ltxcore import latents
from ..engine.ltxcore.conditioning import context_from_processed
from ..engine.ltxcore.fp8_linear import Fp8Linear, Fp8Selection, matmul_path, quantize_linears
from ..engine.ltxcore.model import AVDenoiser, Guidance, LoadedModel
from ..engine.ltxcore.model_forward import apply_mode_to_modules
from ..engine.ltxcore.sequence_parallel import SequenceParallelModel
from ..wire.checks import DTYPES, ForwardMode
from ..wire.constants import AUDIO_LATENT_CHANNELS, AUDIO_LATENT_MEL_BINS
from ..wire.model_files import describe_config
from ..wire.requests import BenchForward, LoadRandomModel
from .ops import InputRejected, op
from .ops_model import _exchange

# The transformer section of the released ltx-2-19b-dev metadata (docs/COMFYUI_LTX2_PARITY.md, section 1).
LTX2_19B_TRANSFORMER = {
    "num_layers": 48,
    "num_attention_heads": 32,
    "attention_head_dim": 128,
    "cross_attention_dim": 4096,
    "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64,
    "audio_cross_attention_dim": 2048,
    "caption_channels": 3840,
    "connector_num_attention_heads": 30,
    "connector_attention_head_dim": 128,
    "in_channels": 128,
    "out_channels": 128,
    "audio_in_channels": 128,
    "audio_out_channels": 128,
    "positional_embedding_theta": 10000.0,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "audio_positional_embedding_max_pos": [20],
    "rope_type": "split",
    "frequencies_precision": "float64",
    "use_middle_indices_grid": True,
    "causal_temporal_positioning": True,
    "timestep_scale_multiplier": 1000,
    "av_ca_timestep_scale_multiplier": 1000.0,
    "norm_eps": 1e-06,
}
INIT_STD = 0.02  # ltx-core's own init scale; timing does not depend on the values


def random_transformer(config: dict, device: torch.device, dtype: torch.dtype, seed: int) -> torch.nn.Module:
    """LTXModel of `config` (keys over the tiny model's full key set) with N(0, INIT_STD) weights,
    built straight on `device` in `dtype`."""
    full = {**tiny_checkpoint_config()["transformer"], **config}
    with torch.device("meta"):
        model = LTXModelConfigurator.from_config({"transformer": full})
    model = model.to(dtype=dtype).to_empty(device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, INIT_STD, generator=generator)
    return model.eval()


@op(LoadRandomModel)
def load_random_model(job, request: LoadRandomModel) -> dict:
    """Replace the loaded model with a random-weight one of `config` (default: the 19B shape).
    request.fp8_matmul: quantize the Linears the released fp8 files quantize (fp8_linear.py) before
    wrapping; the result then tells how many ("fp8_linears"), the weights' bytes and the matmul path."""
    rt = job.runtime
    dtype = DTYPES[request.dtype]
    config = dict(request.config or LTX2_19B_TRANSFORMER)
    mode = ForwardMode(request.mode)
    rt.state.pop("model", None)
    if rt.device.type == "cuda":
        torch.cuda.empty_cache()
    transformer = random_transformer(config, rt.device, dtype, request.seed)
    fp8_linears = 0
    if request.fp8_matmul:
        fp8_linears = quantize_linears(
            transformer, Fp8Selection.released(len(transformer.transformer_blocks))
        )
        if rt.device.type == "cuda":  # bench_forward's peak: not the bf16 weights quantization freed
            torch.cuda.reset_peak_memory_stats(rt.device)
    apply_mode_to_modules(transformer, mode)
    description = describe_config({"transformer": {**tiny_checkpoint_config()["transformer"], **config}})
    rt.state["model"] = LoadedModel(
        path=Path("<random>"),
        dtype=dtype,
        mode=mode,
        description=description,
        causal_positions=True,
        transformer=SequenceParallelModel(transformer, _exchange(job), mode),
        processor=torch.nn.Identity(),
    )
    params = sum(p.numel() for p in transformer.parameters())
    params += sum(m.weight.numel() for m in transformer.modules() if isinstance(m, Fp8Linear))
    result = {"parameters": params, "exchange": getattr(rt.state["exchange"], "name", "none")}
    if request.fp8_matmul:
        tensors = [*transformer.parameters(), *transformer.buffers()]  # fp8 weights are buffers
        path = matmul_path(rt.device)
        result.update(fp8_linears=fp8_linears, parameter_bytes=sum(t.numel() * t.element_size() for t in tensors),
                      fp8_path=path.name, fp8_path_reason=path.reason)  # fmt: skip
    return result


@op(BenchForward)
def bench_forward(job, request: BenchForward) -> dict:
    """Time `repeats` model calls (cond+uncond batch) on a video of request.video_shape (+ audio)."""
    rt = job.runtime
    model: LoadedModel | None = rt.state.get("model")
    if model is None:
        raise InputRejected("no model loaded; run load_random_model or load_model first")
    device, dtype = rt.device, model.dtype
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
