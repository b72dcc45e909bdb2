"""One denoising step of the real LTX-2 19B shape on three paths, side by side in one run:

  (a) comfy backend, worker path: ComfyUI's LTXAVModel and sampler in a worker process, the model
      call patched for sequence parallelism (on one rank: ComfyUI's forward unchanged);
  (b) ltx-core backend, worker path: today's engine (bench_forward of workers/rank/ops_bench.py);
  (c) native ComfyUI in this process: the same ComfyUI model classes and sampler, no workers.
Random bf16 weights of the released 19B configuration, cond+uncond batch with audio (121 frames at
24 fps), 6,144 and 24,576 video tokens. (a) and (c) time the interval between ComfyUI's step
callbacks (one CFG model call plus the sampler's update), (b) the engine's CFG model call; the update
is a few elementwise ops on the latent, far below the timing noise. With --sp-devices, (a) and (b)
also run sequence-parallel on those GPUs. Writes JSON (--out). `--tiny` runs a small configuration on
the CPU in float32 (a smoke test of the whole script).

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_comfy_step.py --out comfy-step.json --sp-devices cuda:0,cuda:1
    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_comfy_step.py --tiny --out comfy-step-cpu.json
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
from pathlib import Path

import torch
from bench_report import finish
from bench_step import AUDIO_FRAMES, SHAPES, TINY, TINY_SHAPES, median

from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import Placement
from ltx2_mgpu.workers.rank.ops_bench import LTX2_19B_TRANSFORMER
from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV, check_comfyui_root


def native_in_process(
    root, config: dict, shapes: dict, device, dtype, repeats: int
) -> dict[int, list[float]]:
    """(c): ComfyUI imported here, the random model built and sampled in this process."""
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui

    import_comfyui(root, device)
    if device.type == "cuda":  # native means ComfyUI's own SDPA order, not the workers' cuDNN-first one
        import comfy.ops

        from ltx2_mgpu.workers.engine.comfy import bootstrap

        comfy.ops.SDPA_BACKEND_PRIORITY[:] = list(bootstrap.comfyui_sdpa_order)
    from ltx2_mgpu.workers.rank.ops_comfy_bench import comfy_random_model, random_job_inputs, time_steps

    patcher = comfy_random_model(config, device, dtype, seed=0)
    out = {}
    for tokens, shape in shapes.items():
        inputs = random_job_inputs(list(shape), AUDIO_FRAMES, config["caption_channels"], 0)
        out[tokens] = time_steps(patcher, inputs, repeats, device)
        print(
            json.dumps({"path": "native_comfyui_in_process", "video_tokens": tokens, "ms": out[tokens]}),
            flush=True,
        )
    del patcher
    gc.collect()
    import comfy.model_management

    comfy.model_management.cleanup_models()  # it holds weak references only: free the weights now
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def worker_paths(devices: str, root, config: dict, shapes: dict, dtype: str, repeats: int) -> dict:
    """(a) and (b) on one group of `devices`: {tokens: {"comfy_worker_ms", "ltxcore_worker_ms", ...}}."""
    group = WorkerGroup(Placement(tuple(devices.split(",")))).start()
    out: dict[int, dict] = {tokens: {} for tokens in shapes}
    try:
        loaded = group.run(
            "comfy_load_random_model", {"comfyui_root": root.path, "dtype": dtype, "config": config}
        )
        for tokens, shape in shapes.items():
            args = {"video_shape": list(shape), "audio_frames": AUDIO_FRAMES, "repeats": repeats}
            reply = group.run("comfy_bench_step", args)[0]
            out[tokens].update(
                comfy_worker_ms=reply["times_ms"],
                comfy_exchange=loaded[0]["exchange"],
                comfy_split_forwards=reply["split_forwards"],
                comfy_peak_memory_gib=reply["peak_memory_bytes"] / 2**30,
            )
            print(
                json.dumps(
                    {"path": "comfy_worker", "devices": devices, "video_tokens": tokens, **out[tokens]}
                ),
                flush=True,
            )
        group.run("unload_model", {})
        group.run("load_random_model", {"dtype": dtype, "config": config})
        for tokens, shape in shapes.items():
            args = {"video_shape": list(shape), "audio_frames": AUDIO_FRAMES, "repeats": repeats, "warmup": 1}
            reply = group.run("bench_forward", {**args, "compare_plain": False})[0]
            out[tokens].update(
                ltxcore_worker_ms=reply["times_ms"],
                ltxcore_peak_memory_gib=reply["peak_memory_bytes"] / 2**30,
            )
            print(
                json.dumps(
                    {"path": "ltxcore_worker", "devices": devices, "video_tokens": tokens, **out[tokens]}
                ),
                flush=True,
            )
    finally:
        group.stop()
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke run with a small configuration")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per path and size")
    parser.add_argument("--sp-devices", nargs="*", default=[], help="also time SP groups, e.g. cuda:0,cuda:1")
    parser.add_argument("--comfyui", default=os.environ.get(COMFYUI_PATH_ENV, ""), help="ComfyUI root")
    args = parser.parse_args(argv)
    if not args.comfyui:
        parser.error(f"name the ComfyUI to measure with --comfyui or {COMFYUI_PATH_ENV}")
    root = check_comfyui_root(args.comfyui, source="--comfyui")
    device = torch.device("cpu" if args.tiny else "cuda:0")
    config = {**LTX2_19B_TRANSFORMER, **(TINY if args.tiny else {})}
    shapes = TINY_SHAPES if args.tiny else SHAPES
    dtype = torch.float32 if args.tiny else torch.bfloat16
    dtype_name = str(dtype).removeprefix("torch.")
    report: dict = {
        "machine": platform.node(),
        "device": str(device),
        "comfyui": {"path": root.path, "version": root.version},
        "comfy_kitchen_installed": importlib.util.find_spec("comfy_kitchen") is not None,
        "config": "tiny" if args.tiny else "ltx-2-19b",
        "repeats": args.repeats,
    }
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
    native = native_in_process(root, config, shapes, device, dtype, args.repeats)
    one = worker_paths(str(device), root, config, shapes, dtype_name, args.repeats)
    cases = []
    for tokens in shapes:
        row = {"video_tokens": tokens, "native_comfyui_in_process_ms": native[tokens], **one[tokens]}
        base = median(native[tokens])
        row["comfy_worker_over_native"] = median(row["comfy_worker_ms"]) / base
        row["comfy_worker_over_ltxcore_worker"] = median(row["comfy_worker_ms"]) / median(
            row["ltxcore_worker_ms"]
        )
        cases.append(row)
    report["cases"] = cases
    for devices in args.sp_devices:
        sp = worker_paths(devices, root, config, shapes, dtype_name, args.repeats)
        for row in cases:
            tokens = row["video_tokens"]
            entry = {"devices": devices, **sp[tokens]}
            entry["comfy_speedup_vs_1_gpu"] = median(row["comfy_worker_ms"]) / median(
                entry["comfy_worker_ms"]
            )
            entry["ltxcore_speedup_vs_1_gpu"] = median(row["ltxcore_worker_ms"]) / median(
                entry["ltxcore_worker_ms"]
            )
            row.setdefault("sequence_parallel", []).append(entry)
    return finish(report, args.out, argv)


if __name__ == "__main__":
    main()
