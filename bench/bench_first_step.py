"""Time from Queue to first step: how long after ComfyUI calls the node does the progress bar move?

    python bench/bench_first_step.py --out first_step.json                  # tiny model, cpu:2
    python bench/bench_first_step.py --devices cuda:0,cuda:1 --dtype bfloat16

The node's function is called the way ComfyUI calls it (a stand-in comfy.utils.ProgressBar records
when each update arrives); the model is already loaded (a first call, not timed, loads the group,
the checkpoint and the upscaler), so this is what an artist waits for on every later Queue. Per node:
  first_progress_s  node call -> first progress update (the end of step 1: workers report per step)
  step_s            median time between later updates (one step)
  setup_s           first_progress_s - step_s: everything before step 1 (argument copies to shared
                    memory, validation, text connectors, the upsample for TDP, building the tiles)
  total_s           node call -> node returns
Medians over --repeats calls. The tiny model's steps take milliseconds, so on it setup_s is the
figure to watch: it is the fixed cost a preview or a short schedule cannot hide.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import torch
from bench_report import finish

from ltx2_mgpu.nodes.sp_sampler import sample_latent
from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale
from ltx2_mgpu.workers.group.manager import MGPUModel, get_manager

# Latent cells of the stage-1 video: 256 x 384 x 25 frames (half of bench_tdp's tiny 512 x 768 x 25).
STAGE1_LATENT = (1, 128, 4, 8, 12)
AUDIO_LATENT = (1, 8, 26, 16)  # 25 frames at 24 fps: round(25 / 24 * 25) audio latent frames
# The distilled stage-1 schedule (8 steps) and the TDP stage-2 default (2 steps), as Lightricks ships them.
SP_SIGMAS = (1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0)
TDP_SIGMAS = (0.625, 0.4, 0.0)
TEXT_TOKENS = 64
FRAME_RATE = 24.0


class _Clock:
    """A stand-in ComfyUI: interrupt flag off, nested tensors, a ProgressBar that timestamps updates."""

    def __init__(self) -> None:
        self.updates: list[float] = []
        clock = self

        class ProgressBar:
            def __init__(self, total, node_id=None):
                self.total = total

            def update_absolute(self, value, total=None, preview=None):
                clock.updates.append(time.perf_counter())

        class NestedTensor:
            is_nested = True

            def __init__(self, tensors):
                self.tensors = list(tensors)

        mm = types.ModuleType("comfy.model_management")
        mm.processing_interrupted = lambda: False
        utils = types.ModuleType("comfy.utils")
        utils.ProgressBar = ProgressBar
        nested = types.ModuleType("comfy.nested_tensor")
        nested.NestedTensor = NestedTensor
        self.nested = NestedTensor
        sys.modules.update(
            {"comfy": types.ModuleType("comfy"), "comfy.model_management": mm, "comfy.utils": utils,
             "comfy.nested_tensor": nested}
        )  # fmt: skip

    def time_call(self, fn) -> dict:
        self.updates = []
        start = time.perf_counter()
        fn()
        end = time.perf_counter()
        steps = [b - a for a, b in zip(self.updates, self.updates[1:])]
        first = self.updates[0] - start
        step = statistics.median(steps) if steps else 0.0
        return {"first_progress_s": first, "step_s": step, "setup_s": first - step, "total_s": end - start}


def _conditioning(seed: int, width: int) -> list:
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(1, TEXT_TOKENS, width, generator=g)
    return [[features, {"unprocessed_ltxav_embeds": True, "frame_rate": FRAME_RATE}]]


def _median(runs: list[dict]) -> dict:
    return {key: round(statistics.median(r[key] for r in runs), 4) for key in runs[0]}


def measure(
    checkpoint: Path, upscaler: Path, devices: str, dtype: str, repeats: int, width: int, clock: _Clock
) -> dict:
    """Both nodes on one group: a warm-up call each, then `repeats` timed calls each."""
    model = MGPUModel.create(checkpoint, devices=devices, dtype=dtype)
    g = torch.Generator().manual_seed(0)
    video = torch.randn(STAGE1_LATENT, generator=g)
    audio = torch.randn(AUDIO_LATENT, generator=g)
    pos, neg = _conditioning(1, width), _conditioning(2, width)

    def sp_call() -> None:
        latent = {"samples": clock.nested([torch.zeros_like(video), torch.zeros_like(audio)])}
        sample_latent(model, pos, neg, latent, torch.tensor(SP_SIGMAS), "euler_ancestral", 4.0, 4.0, seed=1)

    def tdp_call() -> None:
        latent = {"samples": clock.nested([video, audio])}
        tdp_upscale(
            model, pos, neg, latent, str(upscaler), "euler_ancestral", 1.0, 2, "auto", 5,
            torch.tensor(TDP_SIGMAS),
        )  # fmt: skip

    result = {}
    for name, call in (("sp_sampler", sp_call), ("tdp_upscaler", tdp_call)):
        cold = clock.time_call(call)  # loads the model (and for TDP the upscaler)
        runs = [clock.time_call(call) for _ in range(repeats)]
        result[name] = {**_median(runs), "cold_first_progress_s": round(cold["first_progress_s"], 4)}
    result["sp_sampler"]["steps"] = len(SP_SIGMAS) - 1
    result["tdp_upscaler"]["steps"] = len(TDP_SIGMAS) - 1
    return result


def tiny_first_step(devices: str = "cpu:2", repeats: int = 3, dtype: str = "float32") -> dict:
    """The measurement on the embedded tiny model (for bench_tdp.py's JSON); stops the group after."""
    from ltx2_mgpu.workers.embedded.tiny_model import CAPTION_CHANNELS, make_tiny

    files = make_tiny(Path(tempfile.mkdtemp(prefix="bench_first_step_")))
    clock = _Clock()
    try:
        out = measure(
            files.checkpoint, files.spatial_upscaler, devices, dtype, repeats, CAPTION_CHANNELS, clock
        )
    finally:
        get_manager().unload()
    return {
        "devices": devices,
        "dtype": dtype,
        "repeats": repeats,
        "stage1_latent": list(STAGE1_LATENT),
        **out,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the JSON result here (printed as well)")
    parser.add_argument(
        "--devices", default="cpu:2", help="as the MGPU Loader's devices (cpu:2, cuda:0,cuda:1)"
    )
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=5)
    a = parser.parse_args(argv)
    report = {
        "bench": "first_step",
        "model": "tiny",
        "threads": torch.get_num_threads(),
        **tiny_first_step(a.devices, a.repeats, a.dtype),
    }
    return finish(report, a.out, argv)


if __name__ == "__main__":
    main()
