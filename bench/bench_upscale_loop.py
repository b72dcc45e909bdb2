"""The upscale loop on LTX-2.3: how long an artist waits on each Queue, the TDP Upscaler against ComfyUI's
own nodes in the same run (issue 42).

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_upscale_loop.py --tiny --out upscale_loop_tiny.json
    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_upscale_loop.py --models build/upscale23 \\
        --devices cuda:0 --out bench/results/upscale_loop_ltx23_h200.json

The job is ltx2_3_mgpu_upscale_video's: a 5 s 640x352 clip at 25 fps (121 frames; its stage-1 latent
[1, 128, 16, 11, 20] with the audio latent), upscaled x2 to 1280x704 by the x2 upscaler and denoised
with the distilled schedule (0.85, 0.725, 0.4219, 0.0: 3 steps, CFG 1, euler), audio kept. The video
encode and decode are left out: ComfyUI's cache skips them when only the upscale settings change. The
stage-1 latents and the text features (1,024 tokens) are random.

Ours: the MGPU Loader on --devices and the TDP Upscaler's function as ComfyUI calls it (tiles auto,
overlap 5). Native: LTXVLatentUpsampler, then SamplerCustomAdvanced with CFGGuider on
CheckpointLoaderSimple's MODEL, in this process, after ours' workers are stopped. Per case, medians of
--repeats calls after a first (loading) call, kept under `cold`:
  requeue     the seed changed: what ComfyUI re-runs is ours' TDP node (which reuses the loaded
              upscaler and the upsampled latent) or natively the sampler alone (the upsampler's
              output is cached)
  new_clip    another stage-1 latent: ours' node upsamples again; natively upsampler + sampler
  preview     ours with preview "centre tile" (the tile in the middle of the frame, whole clip; a clip
              over 64 latent frames "centre tile, first frames", its first 25 frames)
each with first_step_s (call -> first progress update, which comes at the end of step 1), step_s
(between later updates), setup_s = first_step_s - step_s (Queue to the start of step 1, less the
executor's own milliseconds) and total_s. `difference`: the largest difference of ours' requeue
latent from native's, over native's largest value.

Real size: random weights written by bench/e2e_models.py's writers into --models when missing (the
LTX-2.3 22B checkpoint in the fp8 template file's layout, about 25 GB, and the x2 upscaler); the
worker and native hold one copy each, one after the other. --tiny: `make-tiny --family 2.3`'s files,
two CPU workers, float32 on both sides, a [1, 128, 3, 4, 6] latent and 11 text tokens.

A long clip: --frames 625 (25 s at 25 fps, 79 latent frames) makes ours cut it into spans of frames
(auto beyond 64 latent frames; --time-tiles sets the count), native denoises it whole:

    COMFYUI_PATH=/path/to/ComfyUI python bench/bench_upscale_loop.py --models build/upscale23 \\
        --frames 625 --repeats 1 --out upscale_loop_long.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_report import finish

BENCH = Path(__file__).resolve().parent
FPS = 25.0
STAGE2_SIGMAS = (0.85, 0.7250, 0.4219, 0.0)  # example_workflows/make_workflows.py STAGE2_SIGMAS_23
SAMPLER = "euler"
REAL = {"video": (1, 128, 16, 11, 20), "audio": (1, 8, 121, 16), "tokens": 1024}  # 640x352x121 at 25 fps
TINY = {"video": (1, 128, 3, 4, 6), "audio": (1, 8, 18, 16), "tokens": 11}
CHECKPOINT = "ltx-2.3-22b-dev-fp8.safetensors"
UPSCALER = "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"


class Steps:
    """ComfyUI's progress hook (comfy.utils.set_progress_bar_global_hook): when each update arrived."""

    def __init__(self) -> None:
        self.stamps: list[tuple[float, int]] = []

    def __call__(self, value, total, preview, node_id=None) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # native reports from inside the sampler's loop
        self.stamps.append((time.perf_counter(), int(value)))

    def time(self, fn) -> tuple[dict, object]:
        self.stamps = []
        start = time.perf_counter()
        out = fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        end = time.perf_counter()
        done = [(t, v) for t, v in self.stamps if v > 0]
        if not done:
            raise RuntimeError("no progress update arrived: the hook is not ComfyUI's")
        (t1, v1), (tn, vn) = done[0], done[-1]
        step = (tn - t1) / (vn - v1) if vn > v1 else t1 - start
        first = t1 - start
        return {
            "first_step_s": first,
            "step_s": step,
            "setup_s": first - step * v1,
            "total_s": end - start,
        }, out


def median(runs: list[dict]) -> dict:
    return {key: round(statistics.median(r[key] for r in runs), 4) for key in runs[0]}


def import_comfyui(root: Path, tiny: bool):
    """ComfyUI's modules as main.py configures them (tiny: `--cpu --fp32-unet`, SDPA)."""
    sys.path.insert(0, str(root))
    from comfy.cli_args import args

    if tiny:
        args.cpu, args.fp32_unet, args.use_pytorch_cross_attention = True, True, True
    # main.py's cuda_malloc (cudaMallocAsync) is left out: it must come before torch's import.
    import comfy.model_management
    import comfy.utils
    import folder_paths

    return comfy.utils, folder_paths


def model_files(args, scratch: Path | None) -> tuple[Path, Path, dict]:
    """(checkpoint, upscaler, what they are) under ComfyUI's folder names; --tiny writes into `scratch`."""
    if args.tiny:
        from ltx2_mgpu.workers.embedded.tiny_ltx23 import make_tiny_ltx23

        files = make_tiny_ltx23(scratch)
        return files.checkpoint, files.spatial_upscaler_x2, {"kind": "make-tiny --family 2.3 (random)"}
    sys.path.insert(0, str(BENCH))
    from e2e_models import real_ltx23_config, write_ltx23_checkpoint, write_x2_upscaler

    from ltx2_mgpu.workers.text.gemma3 import GemmaConfig

    checkpoint = args.models / "checkpoints" / CHECKPOINT
    upscaler = args.models / "latent_upscale_models" / UPSCALER
    for path in (checkpoint, upscaler):
        path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if not checkpoint.exists():
        write_ltx23_checkpoint(checkpoint, real_ltx23_config(), GemmaConfig().feature_width, "cuda", seed=0)
    if not upscaler.exists():
        write_x2_upscaler(upscaler, seed=0)
    torch.cuda.empty_cache()
    print(f"[upscale loop] files ready in {time.monotonic() - t0:.0f} s", flush=True)
    return (
        checkpoint,
        upscaler,
        {
            "kind": "random weights at real size (bench/e2e_models.py)",
            CHECKPOINT: "LTX-2.3 22B transformer, fp8 scaled as the template's file; LTX-2 19B's video decoder",
            UPSCALER: "x2 latent upsampler (assumed real width, e2e_models.UPSCALER_MID_CHANNELS)",
        },
    )


def clip_shape(shape: dict, frames: int | None) -> dict:
    """`shape` with the clip's length set to `frames` (8k + 1 at 25 fps: one audio latent per frame)."""
    if frames is None:
        return shape
    if frames < 1 or (frames - 1) % 8:
        raise SystemExit(f"--frames {frames} is not 8k + 1 (e.g. 121, 625)")
    b, c, _, h, w = shape["video"]
    audio = shape["audio"]
    return {**shape, "video": (b, c, (frames - 1) // 8 + 1, h, w), "audio": (*audio[:2], frames, audio[3])}


def conditioning(tokens: int, width: int, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(1, tokens, width, generator=g)
    return [[features, {"unprocessed_ltxav_embeds": True, "frame_rate": FPS}]]


def stage1(shape: dict, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape["video"], generator=g), torch.randn(shape["audio"], generator=g)


def run_ours(args, checkpoint: Path, upscaler: Path, shape: dict, width: int, steps: Steps) -> dict:
    import comfy.nested_tensor

    from ltx2_mgpu.nodes.loader import load_model
    from ltx2_mgpu.nodes.tdp_upscaler import tdp_upscale
    from ltx2_mgpu.workers.group.manager import get_manager
    from ltx2_mgpu.workers.strategies.tiled import AUTO_TILE_FRAMES

    t0 = time.perf_counter()
    model, _native_model, info = load_model(checkpoint.name, args.devices, args.dtype)
    positive, negative = conditioning(shape["tokens"], width, 1), conditioning(shape["tokens"], width, 2)
    sigmas = torch.tensor(STAGE2_SIGMAS)

    def call(video, audio, seed: int, preview: str = "off"):
        latent = {"samples": comfy.nested_tensor.NestedTensor((video, audio))}
        (out,) = tdp_upscale(
            model, positive, negative, latent, upscaler.name, SAMPLER, 1.0, seed, "auto", 5,
            sigmas=sigmas, preview=preview, time_tiles=args.time_tiles,
        )  # fmt: skip
        return out["samples"].unbind()[0]

    video, audio = stage1(shape, 0)
    # A centre tile over every frame of a long clip is one span of it all: its first frames then.
    preview_mode = "centre tile" if shape["video"][2] <= AUTO_TILE_FRAMES else "centre tile, first frames"
    try:
        cold, _ = steps.time(lambda: call(video, audio, 0))
        load_s = time.perf_counter() - t0
        result: dict = {"cold": {**median([cold]), "loader_to_done_s": round(load_s, 4)}, "info": info}
        requeue, new_clip, preview = [], [], []
        kept = None
        for i in range(args.repeats):
            timing, out = steps.time(lambda i=i: call(video, audio, 100 + i))
            requeue.append(timing)
            if i == 0:
                kept = out.float().cpu()
            other = stage1(shape, 1000 + i)
            new_clip.append(steps.time(lambda other=other, i=i: call(*other, 200 + i))[0])
            preview.append(steps.time(lambda i=i: call(video, audio, 300 + i, preview_mode))[0])
        result.update(requeue=median(requeue), new_clip=median(new_clip), preview=median(preview))
        result["world_size"] = model.world_size
    finally:
        get_manager().unload()
    result["_latent"] = kept
    return result


def run_native(args, checkpoint: Path, upscaler: Path, shape: dict, width: int, steps: Steps) -> dict:
    import comfy.model_management
    import comfy.nested_tensor
    from comfy_extras import nodes_custom_sampler as cs
    from comfy_extras import nodes_hunyuan, nodes_lt_upsampler

    import nodes  # ComfyUI's nodes.py

    t0 = time.perf_counter()
    model, _clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint(checkpoint.name)
    (upsampler,) = nodes_hunyuan.LatentUpscaleModelLoader.execute(upscaler.name)
    positive, negative = conditioning(shape["tokens"], width, 1), conditioning(shape["tokens"], width, 2)
    (guider,) = cs.CFGGuider.execute(model, positive, negative, 1.0)
    (sampler,) = cs.KSamplerSelect.execute(SAMPLER)
    sigmas = torch.tensor(STAGE2_SIGMAS)

    def upsample(video):
        with torch.inference_mode():
            return nodes_lt_upsampler.LTXVLatentUpsampler.execute({"samples": video}, upsampler, vae)[0]

    def sample(upsampled, audio, seed: int):
        latent = {  # LTXVConcatAVLatent's output, the audio kept by a zero noise mask
            "samples": comfy.nested_tensor.NestedTensor((upsampled["samples"], audio)),
            "noise_mask": comfy.nested_tensor.NestedTensor(
                (torch.ones_like(upsampled["samples"]), torch.zeros_like(audio))
            ),
        }
        with torch.inference_mode():
            (noise,) = cs.RandomNoise.execute(seed)
            out = cs.SamplerCustomAdvanced.execute(noise, guider, sampler, sigmas, latent)[0]
        return out["samples"].unbind()[0]

    def new_clip_sample(other, seed: int):
        """Upsampler + sampler, the upsampler's own time kept in upsample_s."""
        start = time.perf_counter()
        upsampled = upsample(other[0])
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        upsample_s.append(time.perf_counter() - start)
        return sample(upsampled, other[1], seed)

    video, audio = stage1(shape, 0)
    upsample_s: list[float] = []
    cold, _ = steps.time(lambda: sample(upsample(video), audio, 0))
    result: dict = {"cold": {**median([cold]), "loader_to_done_s": round(time.perf_counter() - t0, 4)}}
    upsampled = upsample(video)
    requeue, new_clip = [], []
    kept = None
    for i in range(args.repeats):
        timing, out = steps.time(lambda i=i: sample(upsampled, audio, 100 + i))
        requeue.append(timing)
        if i == 0:
            kept = out.float().cpu()
        new_clip.append(steps.time(lambda i=i: new_clip_sample(stage1(shape, 1000 + i), 200 + i))[0])
    result.update(requeue=median(requeue), new_clip=median(new_clip))
    result["upsampler_s"] = round(statistics.median(upsample_s), 4)
    result["_latent"] = kept
    comfy.model_management.unload_all_models()
    gc.collect()
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--tiny", action="store_true", help="make-tiny's 2.3 files on two CPU workers")
    size.add_argument("--models", type=Path, help="ComfyUI models folder for the real-size random files")
    parser.add_argument("--devices", help="the MGPU Loader's gpus (default cuda:0; --tiny: cpu:2)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frames", type=int, help="the clip's frames, 8k + 1 (default 121; --tiny 17)")
    parser.add_argument("--time-tiles", type=int, default=0, help="ours' spans of frames (0: auto)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.devices = args.devices or ("cpu:2" if args.tiny else "cuda:0")
    args.dtype = "float32" if args.tiny else "bfloat16"

    from ltx2_mgpu.workers.wire.comfyui_root import COMFYUI_PATH_ENV, check_comfyui_root

    root = os.environ.get(COMFYUI_PATH_ENV)
    if not root:
        raise SystemExit(f"set {COMFYUI_PATH_ENV} to a ComfyUI checkout (this bench runs ComfyUI's nodes)")
    comfy_utils, folder_paths = import_comfyui(Path(check_comfyui_root(root).path), args.tiny)
    scratch = Path(tempfile.mkdtemp(prefix="bench_upscale_loop_")) if args.tiny else None
    try:
        return _run(args, comfy_utils, folder_paths, scratch, argv)
    finally:  # the tiny files are the run's own
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _run(args, comfy_utils, folder_paths, scratch: Path | None, argv: list[str] | None) -> dict:
    checkpoint, upscaler, weights = model_files(args, scratch)
    folder_paths.add_model_folder_path("checkpoints", str(checkpoint.parent), is_default=True)
    folder_paths.add_model_folder_path("latent_upscale_models", str(upscaler.parent), is_default=True)
    shape = clip_shape(TINY if args.tiny else REAL, args.frames)
    from ltx2_mgpu.workers.wire.model_files import read_safetensors_header

    config = json.loads(read_safetensors_header(checkpoint).metadata["config"])
    width = config["transformer"]["cross_attention_dim"] + config["transformer"]["audio_cross_attention_dim"]
    steps = Steps()
    comfy_utils.set_progress_bar_global_hook(steps)
    ours = run_ours(args, checkpoint, upscaler, shape, width, steps)
    native = run_native(args, checkpoint, upscaler, shape, width, steps)
    a, b = ours.pop("_latent"), native.pop("_latent")
    difference = float((a - b).abs().max() / b.abs().max())
    report = {
        "bench": "upscale_loop",
        "family": "2.3",
        "devices": args.devices,
        "dtype": args.dtype,
        "repeats": args.repeats,
        "stage1_latent": {"video": list(shape["video"]), "audio": list(shape["audio"])},
        "upscaled_latent": list(a.shape),
        "text_tokens": shape["tokens"],
        "time_tiles": args.time_tiles or "auto",
        "sigmas": list(STAGE2_SIGMAS),
        "sampler": SAMPLER,
        "weights": weights,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() and not args.tiny else None,
        "ours": ours,
        "native": native,
        "difference": difference,
        "speedup_requeue_total": round(native["requeue"]["total_s"] / ours["requeue"]["total_s"], 3),
        "speedup_new_clip_total": round(native["new_clip"]["total_s"] / ours["new_clip"]["total_s"], 3),
    }
    return finish(report, args.out, argv)


if __name__ == "__main__":
    main()
