"""One denoising step of the real 19B shape under each speed option, side by side in one run.

Variants, each timed in the same worker process on the same inputs (random bf16 weights, released
19B configuration, cond+uncond batch with audio, as bench/bench_step.py):
  - eager: the default engine path;
  - compiled: the Loader's compile_blocks (torch.compile of the block function); its first call
    compiles, reported as `first_call_ms`;
  - fp8: Linears of blocks 1-42 as fp8 matmuls (workers/engine/ltxcore/fp8_linear.py), eager and compiled;
and, with --sp-devices, the sequence-parallel step with a GPU-kernel breakdown (exchange / attention /
matmul / other): the exchange share bounds what overlapping it with compute could save.
The eager variant is timed again after the others, so drift shows. Results go to --out after every
case (a run cut short keeps what it measured).

    python bench/bench_step_variants.py --out variants.json --variants eager compiled fp8 fp8_compiled
    python bench/bench_step_variants.py --out sp.json --variants --sp-devices cuda:0,cuda:1
"""

from __future__ import annotations

import argparse
import json
import platform

import torch
from bench_step import AUDIO_FRAMES, SHAPES, matmul_tflops, median, step_flops

from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import Placement
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

VARIANTS = {  # name -> (fp8 matmuls, compiled blocks)
    "eager": (False, False),
    "compiled": (False, True),
    "fp8": (True, False),
    "fp8_compiled": (True, True),
}


def save(result: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(result, f, indent=2)


def step(group: WorkerGroup, shape, repeats: int, profile: bool = False) -> list[dict]:
    """The engine's step timed in every rank of `group` (one result per rank)."""
    args = {
        "video_shape": list(shape),
        "audio_frames": AUDIO_FRAMES,
        "repeats": repeats,
        "warmup": 1,
        "compare_plain": False,
        "profile": profile,
    }
    return group.run("bench_forward", args)


def time_variants(variants: list[str], tokens: list[int], repeats: int, result: dict, out: str) -> None:
    group = WorkerGroup(Placement(("cuda:0",))).start()
    try:
        loaded_fp8 = None
        for name in [*variants, *(["eager"] if "eager" in variants and len(variants) > 1 else [])]:
            fp8, compiled = VARIANTS[name]
            if fp8 != loaded_fp8:
                info = group.run("load_random_model", {"fp8_matmul": fp8})[0]
                loaded_fp8 = fp8
            group.run("set_compiled", {"compile": compiled})
            for t in tokens:
                r = step(group, SHAPES[t], repeats, profile=name == "eager")[0]
                row = {
                    "variant": name,
                    "video_tokens": t,
                    "ms": r["times_ms"],
                    "first_call_ms": r["warmup_ms"][0],
                    "peak_memory_gib": r["peak_memory_bytes"] / 2**30,
                    "tflops": step_flops(LTX2_19B_TRANSFORMER, t, AUDIO_FRAMES)
                    / (median(r["times_ms"]) / 1e3)
                    / 1e12,
                    "kernel_ms": r["kernel_ms"],
                    "load": info,
                }
                result["cases"].append(row)
                print(json.dumps(row), flush=True)
                save(result, out)
    finally:
        group.stop()
    base = {c["video_tokens"]: median(c["ms"]) for c in result["cases"] if c["variant"] == "eager"}
    for c in result["cases"]:
        if c["video_tokens"] in base:
            c["speedup_vs_eager"] = base[c["video_tokens"]] / median(c["ms"])
    save(result, out)


def time_sp(devices: str, tokens: list[int], repeats: int, compiled: bool, result: dict, out: str) -> None:
    placement = Placement(tuple(devices.split(",")))
    group = WorkerGroup(placement).start()
    try:
        exchange = group.run("load_random_model", {})[0]["exchange"]
        for c in [False, True] if compiled else [False]:
            group.run("set_compiled", {"compile": c})
            for t in tokens:
                runs = step(group, SHAPES[t], repeats, profile=True)
                breakdown = [r["kernel_ms"] for r in runs]
                row = {
                    "devices": devices,
                    "exchange": exchange,
                    "compiled": c,
                    "video_tokens": t,
                    "ms": runs[0]["times_ms"],
                    "first_call_ms": runs[0]["warmup_ms"][0],
                    "kernel_ms_per_rank": breakdown,
                    "exchange_share": [b["exchange"] / max(sum(b.values()), 1e-9) for b in breakdown],
                }
                result["sequence_parallel"].append(row)
                print(json.dumps(row), flush=True)
                save(result, out)
    finally:
        group.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--variants", nargs="*", default=["eager", "compiled"], choices=list(VARIANTS))
    parser.add_argument("--tokens", nargs="*", type=int, default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--sp-devices", default=None, help="e.g. cuda:0,cuda:1: SP step with kernel breakdown"
    )
    parser.add_argument("--sp-compiled", action="store_true", help="also time the SP step compiled")
    args = parser.parse_args()
    result: dict = {
        "machine": platform.node(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "gpus": torch.cuda.device_count(),
        "bf16_matmul_tflops": matmul_tflops(torch.device("cuda:0")),
        "cases": [],
        "sequence_parallel": [],
    }
    torch.cuda.empty_cache()
    if args.variants:
        time_variants(args.variants, args.tokens, args.repeats, result, args.out)
    if args.sp_devices:
        time_sp(args.sp_devices, args.tokens, args.repeats, args.sp_compiled, result, args.out)
    save(result, args.out)


if __name__ == "__main__":
    main()
