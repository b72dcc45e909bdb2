"""One denoising step of the real LTX-2 19B shape: plain ltx-core vs our worker path, side by side.

On a CUDA machine (random bf16 weights, released 19B configuration):
  1. the bf16 matrix rate of this GPU (8192^3 products), the ceiling for model FLOP utilisation;
  2. plain ltx-core: LTXModel.forward on the cond+uncond batch, in this process;
  3. our worker path with one rank: a worker process, the engine's model call (positions, timesteps,
     CFG batch, SP wrapper, ComfyUI-mode forward), timed inside the worker;
  4. which SDPA backend ran (kernel names from the profiler).
Writes JSON (--out). `--tiny` runs the same on CPU with a small configuration (a smoke test).

    python bench/bench_step.py --out step.json                 # GPU, 6144 and 24576 tokens
    python bench/bench_step.py --tiny --out step-cpu.json      # CPU smoke test
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import time

import torch
from ltx_core.model.transformer.modality import Modality
from step_sizes import AUDIO_FRAMES, SHAPES, TINY, TINY_SHAPES, matmul_tflops, median

from ltx2_mgpu.workers.embedded.tiny_model import tiny_checkpoint_config
from ltx2_mgpu.workers.engine.ltxcore import latents
from ltx2_mgpu.workers.engine.ltxcore.bench import random_transformer
from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import Placement
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER


def step_flops(config: dict, tokens: int, audio_tokens: int, batch: int = 2, context: int = 1024) -> float:
    """Matrix FLOPs of one forward (multiply-adds x 2), video and audio, all layers."""
    d = config["num_attention_heads"] * config["attention_head_dim"]
    da = config["audio_num_attention_heads"] * config["audio_attention_head_dim"]
    per_layer = (
        2 * tokens * (4 * d * d + 2 * d * d + 8 * d * d)  # video self-attn projections, text q/out, FF
        + 4 * tokens * tokens * d  # video self-attention scores and values
        + 2 * tokens * 4 * d * da  # audio<->video projections on the video side
        + 4 * tokens * context * d  # video text cross-attention
        + 2 * audio_tokens * (14 * da * da + 4 * da * da)
        + 4 * audio_tokens * audio_tokens * da
        + 4 * 2 * tokens * audio_tokens * da  # a2v and v2a attention
    )
    return batch * config["num_layers"] * per_layer


def plain_inputs(shape, config: dict, device, dtype) -> tuple[Modality, Modality]:
    g = torch.Generator().manual_seed(0)
    b = 2  # cond + uncond
    video_tokens = latents.video_to_tokens(torch.randn(shape, generator=g)).repeat(b, 1, 1)
    t = video_tokens.shape[1]
    positions = latents.video_positions(shape, 24.0).repeat(b, 1, 1, 1)
    audio_shape = (1, 8, AUDIO_FRAMES, 16)
    audio_tokens = latents.audio_to_tokens(torch.randn(audio_shape, generator=g)).repeat(b, 1, 1)
    a_positions = latents.audio_positions(audio_shape).repeat(b, 1, 1, 1)
    c = config["caption_channels"]
    context = torch.randn(b, 1024, 2 * c, generator=g)
    sigma = torch.full((b,), 0.7)
    video = Modality(
        latent=video_tokens.to(device, dtype),
        sigma=sigma.to(device),
        timesteps=torch.full((b, t), 0.7, device=device),
        positions=positions.to(device),
        context=context[..., :c].to(device, dtype),
    )
    audio = Modality(
        latent=audio_tokens.to(device, dtype),
        sigma=sigma.to(device),
        timesteps=torch.full((b, AUDIO_FRAMES), 0.7, device=device),
        positions=a_positions.to(device),
        context=context[..., c:].to(device, dtype),
    )
    return video, audio


def time_plain(model, video, audio, device, warmup: int, repeats: int) -> list[float]:
    out = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        with torch.inference_mode():
            model(video, audio, None)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            out.append((time.perf_counter() - start) * 1e3)
    return out


def attention_kernels(model, video, audio) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.inference_mode():
        model(video, audio, None)
    names = {e.key for e in prof.key_averages()}
    keys = ("flash", "fmha", "cudnn", "efficient", "attention", "sdpa")
    return sorted(n for n in names if any(k in n.lower() for k in keys))[:12]


def time_sp(devices: str, config: dict, shapes: dict, dtype: torch.dtype, repeats: int, result: dict) -> None:
    """The engine's step on a sequence-parallel group; speed-up against the 1-rank worker above."""
    placement = Placement(tuple(devices.split(",")))
    group = WorkerGroup(placement).start()
    try:
        loaded = group.run(
            "load_random_model", {"dtype": str(dtype).removeprefix("torch."), "config": config}
        )
        for case in result["cases"]:
            shape = shapes[case["video_tokens"]]
            args = {"video_shape": list(shape), "audio_frames": AUDIO_FRAMES, "repeats": repeats, "warmup": 1}
            sp = group.run("bench_forward", {**args, "compare_plain": False})[0]
            row = {
                "devices": devices,
                "exchange": loaded[0]["exchange"],
                "ms": sp["times_ms"],
                "speedup_vs_1_gpu": median(case["worker_1rank_ms"]) / median(sp["times_ms"]),
            }
            row["scaling_efficiency"] = row["speedup_vs_1_gpu"] / placement.world_size
            case.setdefault("sequence_parallel", []).append(row)
            print(json.dumps({"video_tokens": case["video_tokens"], **row}), flush=True)
    finally:
        group.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke run with a small configuration")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--sp-devices",
        nargs="*",
        default=[],
        help="also time SP groups, e.g. cuda:0,cuda:1 (one GPU per rank)",
    )
    args = parser.parse_args()
    device = torch.device("cpu" if args.tiny else "cuda:0")
    config = {**LTX2_19B_TRANSFORMER, **(TINY if args.tiny else {})}
    shapes = TINY_SHAPES if args.tiny else SHAPES
    dtype = torch.float32 if args.tiny else torch.bfloat16
    result: dict = {
        "machine": platform.node(),
        "torch": torch.__version__,
        "device": str(device),
        "cases": [],
    }
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(device)
        result["bf16_matmul_tflops"] = matmul_tflops(device)
    model = random_transformer({**tiny_checkpoint_config()["transformer"], **config}, device, dtype, seed=0)
    plain: dict[int, list[float]] = {}
    for tokens, shape in shapes.items():
        video, audio = plain_inputs(shape, config, device, dtype)
        plain[tokens] = time_plain(model, video, audio, device, 1, args.repeats)
        if device.type == "cuda" and tokens == min(shapes):
            result["attention_kernels"] = attention_kernels(model, video, audio)
        del video, audio
    del model
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    group = WorkerGroup(Placement((str(device),))).start()
    try:
        group.run("load_random_model", {"dtype": str(dtype).removeprefix("torch."), "config": config})
        for tokens, shape in shapes.items():
            worker = group.run(
                "bench_forward",
                {
                    "video_shape": list(shape),
                    "audio_frames": AUDIO_FRAMES,
                    "repeats": args.repeats,
                    "warmup": 1,
                },
            )[0]
            flops = step_flops(config, tokens, AUDIO_FRAMES)
            case = {
                "video_tokens": tokens,
                "plain_ltx_core_ms": plain[tokens],
                "worker_1rank_ms": worker["times_ms"],
                "worker_over_plain": median(worker["times_ms"]) / median(plain[tokens]),
                # Same worker, same Modality, interleaved: the engine's cost over ltx-core's forward alone.
                "plain_in_worker_ms": worker["plain_in_worker_ms"],
                "engine_over_plain_same_process": median(worker["times_ms"])
                / median(worker["plain_in_worker_ms"]),
                "step_tflop": flops / 1e12,
                "worker_peak_memory_gib": worker["peak_memory_bytes"] / 2**30,
            }
            if "bf16_matmul_tflops" in result:
                achieved = flops / (median(worker["times_ms"]) / 1e3) / 1e12
                case["worker_tflops"] = achieved
                case["mfu_vs_measured_matmul"] = achieved / result["bf16_matmul_tflops"]
            result["cases"].append(case)
            print(json.dumps(case), flush=True)
    finally:
        group.stop()
    for devices in args.sp_devices:
        time_sp(devices, config, shapes, dtype, args.repeats, result)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({k: v for k, v in result.items() if k != "cases"}, indent=2))


if __name__ == "__main__":
    main()
