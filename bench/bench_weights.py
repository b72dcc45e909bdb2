"""The loader's `weights` option on GPUs smaller than the model: one denoising step of LTX-2.3 22B (bf16, or
--weights fp8 / int8 held as ComfyUI holds such a file; random weights, ComfyUI's LTXAVModel in the workers, cond+uncond with audio) with every worker's GPU
memory capped by torch.cuda.set_per_process_memory_fraction, per option, against replicated uncapped.

- replicated, uncapped: the reference (each worker holds the whole 44 GB model);
- offloaded, capped: ComfyUI's partial load with the budget the worker computes (its cap, less the
  activations of the largest size run and the runtime's own, as the loader's pre-flight estimates);
  the other layers are cast in from host memory per call;
- sharded, capped: FSDP2 over the blocks; needs one GPU per worker (NCCL refuses two ranks on one GPU),
  so on workers sharing a GPU it is recorded as skipped with that reason;
- layers, capped: each worker holds a contiguous range of the blocks, the ranges balancing the blocks'
  bytes (drawn whole on the GPU, the other ranges dropped before the cap; `layer_blocks` in the JSON),
  and runs every token of it, the hidden states broadcast once per range
  (workers/engine/comfy/layer_split.py NOTE [layers]; gloo through host memory on a shared GPU).

Reported per option and size: step times (ms, the first step not counted), the median against
replicated's, peak GPU memory per worker (torch.cuda.max_memory_allocated), and what each worker keeps
on its GPU after loading (resident bytes, streamed layers, block bytes). For the capped options the random
model is drawn on the GPU, moved to host memory and only then capped, so the host needs the whole model
per worker (2 x 44 GB for two workers) and the GPU briefly holds both workers' copies (88 GB).

On one H200 (two workers sharing it; marked so in the JSON), each call well inside 10 minutes:

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_weights.py --devices cuda:0,cuda:0 --cap-gib 24 \\
        --out bench/results/weights_22b_h200_shared.json

The fp8 scaled file's case (the 2.3 template's checkpoint, 22 GB) under 16 GiB caps: --weights fp8
--cap-gib 16 --out bench/results/weights_22b_fp8_h200_shared.json. With two GPUs: --devices
cuda:0,cuda:1 (sharded runs there). `--tiny` runs a small configuration on two
CPU workers in float32 (the whole script, no cap, no timing claims):

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_weights.py --tiny --out x.json
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch
from bench_report import add_comfyui_argument, comfyui_root, finish
from step_sizes import AUDIO_FRAMES, SHAPES, TINY, TINY_SHAPES, median

from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import Placement
from ltx2_mgpu.workers.wire.memory_plan import RUNTIME_BYTES_PER_GPU, ModelSizes, activation_bytes
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER
from ltx2_mgpu.workers.wire.requests import BENCH_WEIGHT_FORMATS

GIB = 2**30
# The LTX-2.3 t2v template's size, 1280x704x121: latent 16 frames of 22 x 40 (--tokens 14080; not a default).
TEMPLATE_SHAPES = {14_080: (1, 128, 16, 22, 40)}
OPTIONS = ("replicated", "offloaded", "sharded", "layers")
# What each worker's load reply reports (workers/engine/comfy/weights.py Residency).
LOAD_KEYS = ("weights", "resident_bytes", "streamed_modules", "block_bytes", "weights_bytes", "layer_blocks")


def reserve_bytes(config: dict, tokens: int, world_size: int, dtype: str) -> int:
    """What a capped worker leaves free for the step: the pre-flight's activation estimate at `tokens`
    plus the runtime's own (workers/wire/memory_plan.py)."""
    width = config["num_attention_heads"] * config["attention_head_dim"]
    sizes = ModelSizes(0, 0, 0, width)
    return activation_bytes(sizes, tokens, world_size, dtype) + RUNTIME_BYTES_PER_GPU


def one_option(
    option: str,
    devices: str,
    root,
    config: dict,
    shapes: dict,
    dtype: str,
    cap_bytes: int,
    repeats: int,
    weights: str = "bf16",
) -> dict:
    """Load the random model under `option` (capped unless replicated) and time every size."""
    world = len(devices.split(","))
    cuda = [d for d in devices.split(",") if d.startswith("cuda")]
    if option == "sharded" and len(set(cuda)) < len(cuda):
        return {"skipped": "sharded needs one GPU per worker: NCCL refuses two ranks on one GPU"}
    capped = option != "replicated" and cap_bytes > 0
    group = WorkerGroup(Placement(tuple(devices.split(","))), comfyui_root=root.path).start()
    try:
        loaded = group.run(
            "comfy_load_random_model",
            {
                "comfyui_root": root.path, "dtype": dtype, "config": config, "weights": weights,
                "placement": option, "memory_cap_bytes": cap_bytes if capped else 0,
                "reserve_bytes": reserve_bytes(config, max(shapes), world, dtype),
            },
        )  # fmt: skip
        out = {
            "memory_cap_gib": cap_bytes / GIB if capped else None,
            "load": [{k: r.get(k) for k in LOAD_KEYS} for r in loaded],
            "sizes": {},
        }
        for tokens, shape in shapes.items():
            args = {"video_shape": list(shape), "audio_frames": AUDIO_FRAMES, "repeats": repeats, "cfg": 4.0}
            try:
                replies = group.run("comfy_bench_step", args)
            except Exception as exc:  # an OOM under the cap is a result to record, not a crash
                out["sizes"][tokens] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            out["sizes"][tokens] = {
                "ms": replies[0]["times_ms"],
                "peak_memory_gib_per_worker": [r["peak_memory_bytes"] / GIB for r in replies],
            }
            print(
                json.dumps(
                    {"option": option, "devices": devices, "video_tokens": tokens, **out["sizes"][tokens]}
                ),
                flush=True,
            )
        return out
    finally:
        group.stop()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke run with a small configuration")
    parser.add_argument(
        "--devices", default="", help="the workers' devices (default cuda:0,cuda:0; --tiny: cpu:2)"
    )
    parser.add_argument(
        "--cap-gib", type=float, default=24.0, help="GPU memory cap per worker for the non-replicated options"
    )
    parser.add_argument("--options", nargs="+", choices=OPTIONS, default=list(OPTIONS))
    parser.add_argument(
        "--weights",
        choices=BENCH_WEIGHT_FORMATS,
        default="bf16",
        help="the random model's format, held as ComfyUI holds such a file (fp8 scaled: the 2.3 template's)",
    )
    parser.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        help="video token counts (default: 6,144 and 24,576; 14,080: the 2.3 t2v template's 1280x704x121)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per option and size")
    add_comfyui_argument(parser)
    args = parser.parse_args(argv)
    root = comfyui_root(parser, args)
    all_shapes = TINY_SHAPES if args.tiny else {**SHAPES, **TEMPLATE_SHAPES}
    defaults = TINY_SHAPES if args.tiny else SHAPES
    shapes = {t: s for t, s in sorted(all_shapes.items()) if t in (args.tokens or defaults)}
    if not shapes:
        parser.error(f"--tokens {args.tokens} not among the sizes {sorted(all_shapes)}")
    devices = args.devices or ("cpu:0,cpu:1" if args.tiny else "cuda:0,cuda:0")
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui
    from ltx2_mgpu.workers.engine.comfy.random_model import family_config

    import_comfyui(root, torch.device("cpu"))
    config = family_config({**LTX2_19B_TRANSFORMER, **(TINY if args.tiny else {})}, "2.3")
    dtype = "float32" if args.tiny else "bfloat16"
    cap_bytes = 0 if args.tiny else int(args.cap_gib * GIB)
    ranks = devices.split(",")
    report: dict = {
        "machine": platform.node(),
        "devices": devices,
        "workers_share_a_gpu": len(set(ranks)) < len(ranks),
        "comfyui": {"version": root.version},  # its path is the machine's
        "config": "tiny" if args.tiny else "ltx-2.3-22b",
        "weight_format": args.weights,
        "repeats": args.repeats,
        "options": {},
    }
    if torch.cuda.is_available() and not args.tiny:
        report["gpu"] = torch.cuda.get_device_name(0)
    for option in args.options:
        report["options"][option] = one_option(
            option, devices, root, config, shapes, dtype, cap_bytes, args.repeats, args.weights
        )
    base = report["options"].get("replicated", {}).get("sizes", {})
    for result in report["options"].values():
        for tokens, row in result.get("sizes", {}).items():
            if "ms" in row and "ms" in base.get(tokens, {}):
                row["speed_vs_replicated"] = median(base[tokens]["ms"]) / median(row["ms"])
    return finish(report, args.out, argv)


if __name__ == "__main__":
    main()
