"""Benchmark commands on ComfyUI's engine: ComfyUI's LTXAVModel of a given shape with random weights,
and sampling steps timed through ComfyUI's own sampler (bench/bench_comfy_step.py).

The model is built by ComfyUI's model classes straight on the rank's device (engine/comfy/random_model.py:
bf16, or the fp8 scaled / int8 convrot layouts ComfyUI loads from a released file), so the 19B and 22B
shapes need no file: the config keys are the ones a checkpoint's metadata gives ComfyUI
(wire/released_configs.py LTX2_19B_TRANSFORMER, random_model.family_config for LTX-2.3 / 2.5).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import torch

from ...wire.checks import DTYPES
from ...wire.comfyui_root import ComfyUIRoot
from ...wire.model_call import ATTENTION_BACKEND_KEY
from ...wire.released_configs import LTX2_19B_TRANSFORMER
from ...wire.requests import ComfyBenchStep, ComfyLoadRandomModel
from ...wire.weight_placement import WEIGHTS_LAYERS, WEIGHTS_REPLICATED, WEIGHTS_SHARDED
from ..protocol import InputRejected, Job
from .model import ComfyModel
from .random_model import comfy_random_model, context_width
from .weights import residency

VIDEO_CHANNELS, AUDIO_CHANNELS, AUDIO_BINS = 128, 8, 16


def random_job_inputs(
    video_shape: list[int],
    audio_frames: int | None,
    caption_channels: int,
    seed: int,
    width: int | None = None,
):
    """(positive, negative, LATENT) as ComfyUI nodes would give them: processed text context
    [1, 1024, width] (default 2 * caption_channels, LTX-2's; random_model.context_width gives any
    release's) and a video (+ audio, nested) latent of random values."""
    import comfy.nested_tensor

    width = 2 * caption_channels if width is None else width
    g = torch.Generator().manual_seed(seed)
    cond = [[torch.randn(1, 1024, width, generator=g), {"frame_rate": 24.0}]]
    uncond = [[torch.randn(1, 1024, width, generator=g), {"frame_rate": 24.0}]]
    video = torch.randn(video_shape, generator=g)
    if audio_frames is None:
        return cond, uncond, {"samples": video}
    audio = torch.randn(video_shape[0], AUDIO_CHANNELS, audio_frames, AUDIO_BINS, generator=g)
    return cond, uncond, {"samples": comfy.nested_tensor.NestedTensor([video, audio])}


def time_steps(
    patcher: Any, inputs: tuple, steps: int, device: torch.device, on_step=None, cfg: float = 4.0
) -> list[float]:
    """Run ComfyUI's sampler (CFG `cfg`, euler) for `steps` + 1 steps; the time between consecutive step
    callbacks is one step (the cond+uncond model call, or cond only at cfg 1, and the sampler update):
    `steps` values in ms."""
    from . import sampling

    stamps: list[float] = []

    def callback(step: int, total: int, x0, x) -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        stamps.append(time.perf_counter())
        if on_step is not None:
            on_step()

    positive, negative, latent = inputs
    sigmas = torch.linspace(0.9, 0.1, steps + 2)  # steps + 1 sampler steps: the first warms up
    with torch.inference_mode():
        sampling.sample(patcher, positive, negative, latent, sigmas, "euler", cfg, 0, callback=callback)
    return [(b - a) * 1e3 for a, b in itertools.pairwise(stamps)]


def denoised(patcher: Any, inputs: tuple, cfg: float = 4.0) -> list[torch.Tensor]:
    """One euler step from sigma 0.9 to 0 without added noise: the guided prediction of the clean
    latent, per stream (what an attention backend's error is measured on)."""
    from . import sampling

    positive, negative, latent = inputs
    with torch.inference_mode():
        out = sampling.sample(
            patcher, positive, negative, latent, torch.tensor([0.9, 0.0]), "euler", cfg, 0, add_noise=False
        )
    return [s.float().cpu() for s in sampling.streams(out["samples"])]


def run_bench(engine, job: Job, request) -> dict:
    """ComfyUI's engine's benchmark commands (Engine.bench)."""
    if isinstance(request, ComfyLoadRandomModel):
        engine.unload()
        engine.model, reply = load_random_model(job, request)
        return reply
    if isinstance(request, ComfyBenchStep):
        return bench_step(engine.loaded(), job, request)
    raise engine.refuse(f"the benchmark command {request.OP!r}")


def load_random_model(job: Job, request: ComfyLoadRandomModel) -> tuple[ComfyModel, dict]:
    """ComfyUI's LTXAVModel of `config` (default: the 19B shape), random, in the weight format `weights`
    (random_model.WEIGHT_FORMATS), and the reply."""
    from .bootstrap import import_comfyui
    from .layer_split import SoloExchange

    device = job.device
    import_comfyui(ComfyUIRoot(request.comfyui_root, "unknown"), device)
    dtype = DTYPES[request.dtype]
    config = dict(request.config or LTX2_19B_TRANSFORMER)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    layered = request.placement == WEIGHTS_LAYERS and job.world_size > 1
    if request.placement == WEIGHTS_REPLICATED:
        cap_gpu_memory(device, request.memory_cap_bytes)
        patcher = comfy_random_model(config, device, dtype, request.seed, request.weights)
    elif layered:
        patcher = layers_random_model(job, config, dtype, request)
    else:
        patcher = host_random_model(job, config, dtype, request)
    model = ComfyModel(path=Path("<random>"), dtype=dtype, patcher=patcher)
    # weights layers: every rank runs every token of its blocks (NOTE [layers]).
    model.extras.update(exchange=SoloExchange() if layered else job.head_exchange(), config=config)
    params = sum(p.numel() for p in model.diffusion_model.parameters())
    weights_bytes = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    return model, {
        "parameters": params,
        "exchange": model.extras["exchange"].name,
        "weights_bytes": int(weights_bytes),
        **residency(patcher).to_reply(),
    }


def host_random_model(job, config: dict, dtype: torch.dtype, request: ComfyLoadRandomModel) -> Any:
    """The random model held in host memory and made resident as the loader's placement makes a file's
    (offloaded: ComfyUI's partial load under the device's budget; sharded: FSDP2 over the blocks). Drawn
    on the rank's device and moved to the host before the cap, so the capped GPU then holds only what the
    option keeps there."""
    import comfy.model_patcher
    import torch.distributed as dist

    from .random_model import random_base_model
    from .weights import auto_resident_bytes, make_resident, set_budget, shard_blocks

    device, host = job.device, torch.device("cpu")
    # Drawn on the GPU when there is one (seconds, against minutes for 22B on the CPU), before the cap.
    model = random_base_model(config, device, dtype, request.seed, request.weights).to(host)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    cap_gpu_memory(device, request.memory_cap_bytes)
    patcher = comfy.model_patcher.ModelPatcher(model, load_device=device, offload_device=host)
    sharded = request.placement == WEIGHTS_SHARDED
    set_budget(patcher, 0 if sharded else auto_resident_bytes(device, request.reserve_bytes))
    make_resident(patcher)
    if sharded:
        shard_blocks(patcher, device, dist.group.WORLD)
    return patcher


def layers_random_model(job, config: dict, dtype: torch.dtype, request: ComfyLoadRandomModel) -> Any:
    """The random model under weights layers: drawn whole on the rank's device (every rank the same
    weights, as from one file), the blocks other ranks hold dropped (layer_split.place_layers: the ranges
    balance the blocks' bytes as drawn, as a file's header gives them), then the cap, so the capped GPU
    holds only this rank's range and the layers outside the blocks."""
    import comfy.model_patcher

    from .layer_split import place_layers
    from .random_model import random_base_model
    from .weights import make_resident

    device = job.device
    model = random_base_model(config, device, dtype, request.seed, request.weights)
    patcher = comfy.model_patcher.ModelPatcher(model, load_device=device, offload_device=torch.device("cpu"))
    place_layers(patcher, job.rank, job.world_size)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    cap_gpu_memory(device, request.memory_cap_bytes)
    make_resident(patcher)
    return patcher


def cap_gpu_memory(device: torch.device, cap_bytes: int) -> None:
    """What a smaller GPU would give this worker (bench/bench_weights.py): 0 leaves it uncapped."""
    if device.type == "cuda" and cap_bytes > 0:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_bytes / total), device)


def bench_step(model: ComfyModel, job: Job, request: ComfyBenchStep) -> dict:
    """Time `repeats` sampling steps (cond+uncond, audio when audio_frames is given) through ComfyUI's
    sampler on the SP-patched model; the first step is the warm-up (and, with compile, the compile) and is
    not counted."""
    from . import attention_backend
    from .call_graphs import attach_call_graphs
    from .compiled_blocks import set_compiled
    from .sample_job import agree_batching
    from .sequence_parallel import SequenceParallel

    device = job.device
    set_compiled(model, request.compile)
    parallel = SequenceParallel.for_model(model.extras["exchange"], model.diffusion_model)
    patcher = parallel.patch(model.patcher)
    if request.attention:  # as a ModelAttentionBackend MODEL's calls name it (NOTE [attention backend])
        options = patcher.model_options["transformer_options"]
        options[ATTENTION_BACKEND_KEY] = request.attention
        try:
            attention_backend.check(options)
        except ValueError as exc:
            raise InputRejected(str(exc)) from exc
    graphs = attach_call_graphs(patcher, model.extras["exchange"], enabled=request.cuda_graphs)
    agree_batching(job, patcher)
    inputs = random_job_inputs(
        list(request.video_shape),
        request.audio_frames,
        int(model.extras["config"]["caption_channels"]),
        0,
        context_width(model.extras["config"]),
    )
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = time_steps(patcher, inputs, request.repeats, device, on_step=job.check_cancel, cfg=request.cfg)
    if request.denoised_path:
        prediction = denoised(patcher, inputs, request.cfg)  # every rank runs it: SP needs them all
        if job.rank == 0:
            torch.save(prediction, request.denoised_path)
    shape = request.video_shape
    return {
        "times_ms": times,
        "split_forwards": parallel.split_forwards,
        "attention_backend_calls": parallel.backend_calls,
        "peak_memory_bytes": int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else 0,
        "tokens": int(shape[2] * shape[3] * shape[4]),
        "cuda_graphs": None if graphs is None else graphs.counts(),
        "compiled": request.compile,
    }
