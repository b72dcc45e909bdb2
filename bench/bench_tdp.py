"""Benchmark of the TDP stage: tiled (default 2x2) against the untiled stage, same device, side by side.

    python bench/bench_tdp.py --out tdp.json                       # tiny model on the CPU (default)
    python bench/bench_tdp.py --real19b --out tdp_19b.json         # 19B shape, random weights, CUDA

One process, one device: the untiled stage (engine.AVDenoiser over the whole frame) and the tiled
stage (ops_tdp.TiledDenoiser, every tile run in turn on this device) alternate `--repeats` times
after a warm-up run of each, from the same upscaled latent, noise and seed. So the ratio says what
tiling costs or saves per device; with one GPU per tile the tiles run at once, and
`projected_parallel_s` estimates that as tiled time x ceil(tiles / gpus) / tiles (`--gpus`, default
one per tile; the all_reduce of one latent per step is left out). `max_abs_diff` is the largest
difference between the two results: TDP is an approximation (each tile sees only its region).

Also in the JSON:
  seam_ratio, seam_height / seam_width   NOTE [seam ratio] (workers/strategies/tile_seams.py) on the
      tiled result: mean |difference| between neighbouring cells across the overlap bands over the
      same in tile interiors (about 1: no seam); `seam_ratio_untiled_same_edges` is what the content
      alone gives at those edges, `seam_ratio_of_tiling_error` the metric on tiled - untiled.
  preview_centre_tile_*, preview_first_frames_*   the preview switch (NOTE [tdp preview]) on this
      device: median time and its ratio to the tiled stage (run alternately with the previews); for
      the centre tile the largest difference from the full run in the tile's interior. On N GPUs
      the centre tile is split over all of them (sequence parallel), so its time there is about
      this one's / N.
  queue_to_first_step (tiny only)   bench_first_step.py on a worker group (`--first-step-devices`):
      node call -> first progress update, for the SP Sampler and the TDP Upscaler, model loaded.

Tiny: the embedded tiny LTX-2 (random weights), a random stage-1 latent upsampled by the tiny
upsampler, float32. --real19b: the 19B transformer's architecture (48 layers, 32 x 128 video heads)
with random weights in bfloat16 on cuda:0, random text context, the stage-2 latent made directly at
the target size (the upsampler costs milliseconds and is left out); needs ~45 GB of GPU memory.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch
from bench_report import finish

from ltx2_mgpu.workers.embedded.tiny_model import tiny_checkpoint_config
from ltx2_mgpu.workers.engine.ltxcore import latents, tdp_upsample
from ltx2_mgpu.workers.engine.ltxcore.conditioning import TextContext, context_from_features
from ltx2_mgpu.workers.engine.ltxcore.model import LoadedModel
from ltx2_mgpu.workers.engine.ltxcore.model_forward import ForwardMode, apply_mode_to_modules
from ltx2_mgpu.workers.engine.ltxcore.sequence_parallel import SequenceParallelModel
from ltx2_mgpu.workers.rank import ops_tdp
from ltx2_mgpu.workers.strategies import tile_seams, tiled
from ltx2_mgpu.workers.strategies.tdp_preview import CENTRE_TILE, FIRST_FRAMES, PreviewRegion, preview_region
from ltx2_mgpu.workers.wire.model_files import describe_config
from ltx2_mgpu.workers.wire.released_configs import LTX2_19B_TRANSFORMER

# Lightricks' TDP stage-2 schedule (Lightricks' LTX-2 release notes).
DEFAULT_SIGMAS = (0.625, 0.4, 0.0)
# The figure: 1024x1536x121 upscaled, 2x2 tiles with 5 cells of overlap.
REAL_SIZE = (1024, 1536, 121)
TINY_SIZE = (512, 768, 25)
FRAME_RATE = 24.0
# The released 19B shape, shared with the other benchmarks (workers/wire/released_configs.py).
REAL_19B = LTX2_19B_TRANSFORMER
CONTEXT_TOKENS = 1024  # the connectors' output length (workers/conditioning.CONTEXT_LENGTH)
TEXT_TOKENS = 64  # tiny: prompt tokens before the connectors


class _OneRank:
    name, rank, world_size = "none", 0, 1


def _latent_cells(height: int, width: int, frames: int) -> tuple[int, int, int]:
    return (frames - 1) // 8 + 1, height // 32, width // 32


def tiny_setup(size: tuple[int, int, int], seed: int) -> dict:
    """The tiny model in-process; stage-1 latent at half `size`, upsampled by the tiny upsampler."""
    from ltx2_mgpu.workers.embedded.tiny_model import make_tiny

    files = make_tiny(Path(tempfile.mkdtemp(prefix="bench_tdp_")))
    cpu = torch.device("cpu")
    model = LoadedModel.load(files.checkpoint, cpu, torch.float32, _OneRank(), ForwardMode.COMFYUI)
    g = torch.Generator().manual_seed(seed)
    f, h, w = _latent_cells(*size)
    stage1 = torch.randn(1, 128, f, h // 2, w // 2, generator=g)
    up = tdp_upsample.spatial_upsampler(model, str(files.spatial_upscaler), cpu)
    video = tdp_upsample.upsample_video(stage1, up, tdp_upsample.video_statistics(model, cpu), torch.float32)
    width = model.description.caption_channels
    positive = context_from_features(
        torch.randn(1, TEXT_TOKENS, width, generator=g), model.processor, cpu, torch.float32
    )
    negative = context_from_features(
        torch.randn(1, TEXT_TOKENS, width, generator=g), model.processor, cpu, torch.float32
    )
    audio = torch.randn(1, 8, _audio_frames(size[2]), 16, generator=g)
    return {
        "model": model,
        "video": video,
        "audio": audio,
        "positive": positive,
        "negative": negative,
        "device": cpu,
    }


def real19b_setup(size: tuple[int, int, int], seed: int, device: torch.device, layers: int) -> dict:
    """The 19B transformer with random weights (bf16) and random context; no text connectors.
    `layers` below 48 only for smoke tests of this script."""
    from ltx_core.model.transformer import LTXModelConfigurator

    config = {"transformer": {**tiny_checkpoint_config()["transformer"], **REAL_19B, "num_layers": layers}}
    with torch.device("meta"):
        transformer = LTXModelConfigurator.from_config(config).to(torch.bfloat16)  # no memory yet
    transformer = transformer.to_empty(device=device).eval()
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for p in transformer.parameters():
            p.normal_(0.0, 0.02, generator=g)  # timing does not depend on the values
    apply_mode_to_modules(transformer, ForwardMode.COMFYUI)
    model = LoadedModel(
        path=Path("random-19b"),
        dtype=torch.bfloat16,
        mode=ForwardMode.COMFYUI,
        description=describe_config(config),
        causal_positions=True,
        transformer=SequenceParallelModel(transformer, _OneRank(), ForwardMode.COMFYUI),
        processor=torch.nn.Identity(),
    )
    f, h, w = _latent_cells(*size)

    def context() -> TextContext:
        shape = (1, CONTEXT_TOKENS, REAL_19B["caption_channels"])
        make = lambda: torch.randn(shape, generator=g, device=device).to(torch.bfloat16)  # noqa: E731
        return TextContext(video=make(), audio=make(), mask=None)

    return {
        "model": model,
        "video": torch.randn(1, 128, f, h, w, generator=g, device=device).float(),
        "audio": torch.randn(1, 8, _audio_frames(size[2]), 16, generator=g, device=device).float(),
        "positive": context(),
        "negative": context(),
        "device": device,
    }


def _audio_frames(frames: int) -> int:
    return round(frames / FRAME_RATE * latents.AudioTiming().latent_frames_per_second)


def _timed(fn, device: torch.device) -> tuple[float, float, torch.Tensor]:
    """(wall seconds, this process's CPU seconds, result). CPU seconds are the steadier figure on a
    shared CPU machine (other processes stretch wall time); on CUDA, wall time after a sync counts."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - wall, time.process_time() - cpu, out


def bench(setup: dict, grid: tiled.TileGrid, job: dict, repeats: int) -> dict:
    model, video, audio, device = setup["model"], setup["video"], setup["audio"], setup["device"]
    negative = setup["negative"] if job["cfg"] != 1.0 else None

    def untiled() -> torch.Tensor:
        return ops_tdp.denoise_untiled(model, video, audio, setup["positive"], negative, job, device=device)

    def tiled_run() -> torch.Tensor:
        return ops_tdp.denoise_upscaled(
            model, video, audio, setup["positive"], negative, grid, job, rank=0, world_size=1, device=device
        )

    _timed(untiled, device)  # warm-up (allocator, kernels, caches)
    _timed(tiled_run, device)
    runs: dict[str, list[tuple[float, float]]] = {"untiled": [], "tiled": []}
    for _ in range(repeats):  # interleaved, so drift in clocks or load hits both alike
        wall, cpu, ref = _timed(untiled, device)
        runs["untiled"].append((wall, cpu))
        wall, cpu, out = _timed(tiled_run, device)
        runs["tiled"].append((wall, cpu))
    frames = video.shape[2]
    tile_tokens = [frames * t.h.size * t.w.size for t in grid.tiles]
    result = {
        "tokens_untiled": frames * video.shape[3] * video.shape[4],
        "tokens_per_tile": tile_tokens,
        "tokens_tiled_total": sum(tile_tokens),
    }
    for name, times in runs.items():
        result[f"{name}_s"] = [round(wall, 4) for wall, _ in times]
        result[f"{name}_median_s"] = round(statistics.median(wall for wall, _ in times), 4)
        if device.type == "cpu":
            result[f"{name}_median_cpu_s"] = round(statistics.median(cpu for _, cpu in times), 4)
    result["max_abs_diff"] = float((out - ref).abs().max())
    result["max_abs_untiled"] = float(ref.abs().max())
    result.update(seams(out, ref, grid))
    return result


def seams(tiled_out: torch.Tensor, untiled: torch.Tensor, grid: tiled.TileGrid) -> dict:
    """NOTE [seam ratio] on the tiled result; the same edges of the untiled result (what the content
    alone gives), and the tiling error (tiled - untiled, where the content cancels)."""
    if grid.counts == (1, 1):
        return {}
    return {
        **tile_seams.seam_report(tiled_out, grid).as_dict(),
        "seam_ratio_untiled_same_edges": round(tile_seams.seam_report(untiled, grid).ratio, 4),
        "seam_ratio_of_tiling_error": round(tile_seams.seam_report(tiled_out - untiled, grid).ratio, 4),
    }


def bench_previews(setup: dict, grid: tiled.TileGrid, job: dict, repeats: int, frames: int) -> dict:
    """The preview switch (NOTE [tdp preview]) on this one device: the tiled stage and each preview
    alternate `repeats` times after a warm-up of each (so drift hits all alike); ratios are preview
    time over tiled time. For the centre tile also the largest difference from the full run in the
    tile's interior."""
    model, video, audio, device = setup["model"], setup["video"], setup["audio"], setup["device"]
    negative = setup["negative"] if job["cfg"] != 1.0 else None
    shape = tuple(video.shape)
    regions = {
        "tiled": None,
        **{m: preview_region(m, frames, grid, shape) for m in (CENTRE_TILE, FIRST_FRAMES)},
    }

    def run(region: PreviewRegion | None) -> torch.Tensor:
        return ops_tdp.denoise_upscaled(
            model, video, audio, setup["positive"], negative, grid, job,
            rank=0, world_size=1, device=device, region=region,
        )  # fmt: skip

    outs = {name: _timed(lambda r=region: run(r), device)[2] for name, region in regions.items()}  # warm-up
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in regions}
    for _ in range(repeats):
        for name, region in regions.items():
            wall, cpu, _ = _timed(lambda r=region: run(r), device)
            times[name].append((wall, cpu))
    medians = {
        n: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for n, t in times.items()
    }
    result = {}
    for mode in (CENTRE_TILE, FIRST_FRAMES):
        key, region = "preview_" + mode.replace(" ", "_"), regions[mode]
        result[f"{key}_shape"] = list(region.shape)
        result[f"{key}_median_s"] = round(medians[mode][0], 4)
        result[f"{key}_ratio"] = round(medians[mode][0] / medians["tiled"][0], 3)
        if device.type == "cpu":  # CPU seconds: steadier on a shared machine (see _timed)
            result[f"{key}_median_cpu_s"] = round(medians[mode][1], 4)
            result[f"{key}_cpu_ratio"] = round(medians[mode][1] / medians["tiled"][1], 3)
        if region.tile is not None:
            reference = region.cut(outs["tiled"])
            diff = (outs[mode] - reference)[..., region.tile.interior()].abs().max()
            result[f"{key}_index"] = region.tile.index
            result[f"{key}_interior_max_abs_diff"] = float(diff)
            result[f"{key}_interior_relative_diff"] = float(diff / reference.abs().max())
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="write the JSON result here (printed as well)")
    parser.add_argument("--real19b", action="store_true", help="19B architecture, random weights, CUDA")
    parser.add_argument(
        "--size", type=int, nargs=3, metavar=("HEIGHT", "WIDTH", "FRAMES"), help="output pixels"
    )
    parser.add_argument("--tiles", type=int, nargs=2, default=(2, 2), metavar=("ROWS", "COLUMNS"))
    parser.add_argument("--overlap", type=int, default=5, help="latent cells")
    parser.add_argument(
        "--gpus", type=int, default=0, help="for projected_parallel_s (default: one per tile)"
    )
    parser.add_argument("--cfg", type=float, default=1.0)
    parser.add_argument("--sampler", default="euler_ancestral")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda:0", help="--real19b only")
    parser.add_argument(
        "--layers", type=int, default=REAL_19B["num_layers"], help="--real19b only; < 48: smoke test"
    )
    parser.add_argument(
        "--no-previews", dest="previews", action="store_false", help="skip the preview timings"
    )
    parser.add_argument(
        "--preview-frames", type=int, default=9, help="pixel frames of the first-frames preview"
    )
    parser.add_argument(
        "--first-step-devices",
        default="cpu:2",
        help="tiny only: time from node call to first step on a worker group of these devices "
        "(bench_first_step.py); empty to skip",
    )
    a = parser.parse_args(argv)
    device = torch.device(a.device)
    if a.real19b and device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--real19b needs a CUDA GPU")
    size = tuple(a.size) if a.size else (REAL_SIZE if a.real19b else TINY_SIZE)
    setup = real19b_setup(size, a.seed, device, a.layers) if a.real19b else tiny_setup(size, a.seed)
    video = setup["video"]
    grid = tiled.make_grid((video.shape[3], video.shape[4]), tuple(a.tiles), a.overlap)
    job = {
        "cfg": a.cfg,
        "frame_rate": FRAME_RATE,
        "seed": a.seed,
        "sampler": a.sampler,
        "sigmas": torch.tensor(DEFAULT_SIGMAS),
    }
    result = bench(setup, grid, job, a.repeats)
    if a.previews:
        result.update(bench_previews(setup, grid, job, a.repeats, a.preview_frames))
    if a.first_step_devices and not a.real19b:
        from bench_first_step import tiny_first_step

        result["queue_to_first_step"] = tiny_first_step(a.first_step_devices, a.repeats)
    num_tiles = len(grid.tiles)
    gpus = a.gpus or num_tiles
    result["projected_parallel_s"] = round(
        result["tiled_median_s"] * math.ceil(num_tiles / gpus) / num_tiles, 4
    )
    result["ratio_tiled_over_untiled"] = round(result["tiled_median_s"] / result["untiled_median_s"], 3)
    if "tiled_median_cpu_s" in result:
        result["cpu_ratio_tiled_over_untiled"] = round(
            result["tiled_median_cpu_s"] / result["untiled_median_cpu_s"], 3
        )
    result["projected_speedup"] = round(result["untiled_median_s"] / result["projected_parallel_s"], 3)
    report = {
        "bench": "tdp",
        "model": (f"19b-random-{a.layers}-layers" if a.real19b else "tiny"),
        "device": torch.cuda.get_device_name(setup["device"]) if setup["device"].type == "cuda" else "cpu",
        "dtype": str(setup["model"].dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "size_hwf": list(size),
        "latent": list(video.shape),
        "tiles": list(grid.counts),
        "overlap": a.overlap,
        "gpus_for_projection": gpus,
        "sigmas": list(DEFAULT_SIGMAS),
        "cfg": a.cfg,
        "sampler": a.sampler,
        "repeats": a.repeats,
        **result,
    }
    return finish(report, a.out, argv)


if __name__ == "__main__":
    main()
