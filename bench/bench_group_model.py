"""The MGPU Loader's MODEL path against a step: what native sampling in this process costs per model
call when every call runs in the worker group (nodes/group_model/), at the LTX-2 19B shape with
random bf16 weights, cond+uncond batched with audio (121 frames at 24 fps), 6,144 and 24,576 tokens.

Side by side on the same group and model:
  (a) the step inside the worker: ComfyUI's sampler and model in the rank (comfy_bench_step), no
      round trip; the reference a step costs;
  (b) the group MODEL: ComfyUI's sampler here on the weightless model, each CFG model call sent to
      the rank (latents through shared memory, the context cached there after the first call).
Per call it records the wall time here and the forward time the rank measured (synchronized), so
overhead = wall - forward: serialization, shared memory, the copies to and from the GPU, the
control messages. Goal (issue 21): overhead <= 1% of a step. GPU only; `--tiny` runs a small
configuration on the CPU in float32 (a smoke test of the script, its numbers mean nothing).

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_group_model.py --out bench/results/group_model_h200.json
    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_group_model.py --out group-model-2gpu.json --devices cuda:0,cuda:1
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from bench_report import add_comfyui_argument, comfyui_root, finish
from step_sizes import AUDIO_FRAMES, SHAPES, TINY, TINY_SHAPES, median

from ltx2_mgpu.workers.group.client import WorkerGroup
from ltx2_mgpu.workers.group.launcher import Placement
from ltx2_mgpu.workers.group.manager import MGPUModel
from ltx2_mgpu.workers.wire.backend import BACKEND_COMFY
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER
from ltx2_mgpu.workers.wire.requests import ComfyModelCall, Request


class TimedRun:
    """The group's run, timing every model call: wall here (the whole GroupModelCall.forward: encoding,
    the copies into and out of shared memory and to the UI device, the job), forward as rank 0
    measured it."""

    def __init__(self, group: WorkerGroup) -> None:
        self.group = group
        self.wall_ms: list[float] = []
        self.forward_ms: list[float] = []

    def __call__(self, request: Request) -> list[dict]:
        replies = self.group.run(request.OP, request.to_wire())
        if isinstance(request, ComfyModelCall):
            self.forward_ms.append(float(replies[0]["forward_ms"]))
        return replies

    def timing(self, call):
        """`call` (a GroupModelCall) with its forward timed from entry to the returned outputs."""
        inner = call.forward

        def forward(*args, **kwargs):
            started = time.perf_counter()
            out = inner(*args, **kwargs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()  # the outputs' copy to the UI device is part of the call
            self.wall_ms.append((time.perf_counter() - started) * 1e3)
            return out

        call.forward = forward
        return call


def group_model_steps(config: dict, shape, dtype, repeats: int, timed: TimedRun, devices) -> dict:
    """(b): ComfyUI's sampler here on the group MODEL; step times and per-call wall/forward."""
    import comfy.supported_models

    from ltx2_mgpu.nodes.group_model.call import GroupModelCall
    from ltx2_mgpu.nodes.group_model.model import group_model_from_config
    from ltx2_mgpu.workers.engine.comfy.bench import random_job_inputs, time_steps
    from ltx2_mgpu.workers.engine.comfy.random_model import unet_config

    # The configuration comfy_load_random_model builds in the rank (engine/comfy/random_model.py).
    model_config = comfy.supported_models.LTXAV(unet_config(config))
    recipe = MGPUModel(
        checkpoint="<random 19B shape>",
        dtype=str(dtype).removeprefix("torch."),
        devices=devices,
        backend=BACKEND_COMFY,  # the MODEL output's engine (the group runs comfy_load_random_model)
    )
    patcher = group_model_from_config(model_config, timed.timing(GroupModelCall(recipe, run=timed)), dtype)
    inputs = random_job_inputs(list(shape), AUDIO_FRAMES, config["caption_channels"], 0)
    first = len(timed.wall_ms)
    steps_ms = time_steps(patcher, inputs, repeats, patcher.load_device)
    # The first call of a run stores the context on the rank: reported apart from the steady calls.
    wall, forward = timed.wall_ms[first:], timed.forward_ms[first:]
    overhead = [w - f for w, f in zip(wall, forward)]
    return {
        "group_model_step_ms": steps_ms,
        "call_wall_ms": wall,
        "call_forward_ms": forward,
        "call_overhead_ms": overhead,
        "first_call_overhead_ms": overhead[0],
        "steady_call_overhead_ms": median(overhead[1:]),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke run with a small configuration")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per path and size")
    parser.add_argument("--devices", default="", help="the group's devices (default cuda:0; --tiny: cpu)")
    add_comfyui_argument(parser)
    args = parser.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        parser.error("this benchmark needs a CUDA GPU (or --tiny for a CPU smoke run)")
    root = comfyui_root(parser, args)
    device = torch.device("cpu" if args.tiny else "cuda:0")
    devices = tuple((args.devices or str(device)).split(","))
    config = {**LTX2_19B_TRANSFORMER, **(TINY if args.tiny else {})}
    shapes = TINY_SHAPES if args.tiny else SHAPES
    dtype = torch.float32 if args.tiny else torch.bfloat16
    from ltx2_mgpu.workers.engine.comfy.bootstrap import import_comfyui

    import_comfyui(root, device)  # this process is the UI side: ComfyUI's sampler runs here
    report: dict = {
        "machine": platform.node(),
        "device": str(device),
        "devices": list(devices),
        "comfyui": {"version": root.version},  # its path is the machine's
        "config": "tiny" if args.tiny else "ltx-2-19b",
        "repeats": args.repeats,
    }
    if device.type == "cuda":
        report["gpu"] = torch.cuda.get_device_name(device)
    group = WorkerGroup(Placement(devices), comfyui_root=root.path).start()  # CPU workers forked with it
    cases = []
    try:
        group.run(
            "comfy_load_random_model",
            {"comfyui_root": root.path, "dtype": str(dtype).removeprefix("torch."), "config": config},
        )
        timed = TimedRun(group)
        for tokens, shape in shapes.items():
            step = {"video_shape": list(shape), "audio_frames": AUDIO_FRAMES, "repeats": args.repeats}
            in_worker = group.run("comfy_bench_step", step)[0]["times_ms"]
            row = {"video_tokens": tokens, "in_worker_step_ms": in_worker}
            row.update(group_model_steps(config, shape, dtype, args.repeats, timed, devices))
            base = median(in_worker)
            row["steady_call_overhead_fraction_of_step"] = row["steady_call_overhead_ms"] / base
            row["group_model_step_over_in_worker"] = median(row["group_model_step_ms"]) / base
            print(json.dumps(row), flush=True)
            cases.append(row)
    finally:
        group.stop()
    report["cases"] = cases
    return finish(report, args.out, argv)


if __name__ == "__main__":
    main()
