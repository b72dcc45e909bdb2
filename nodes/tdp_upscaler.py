"""TDP Upscaler: upsample a stage-1 latent 2x and denoise it in tiles spread over the group's GPUs."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path

import torch

from ..workers.group import console
from ..workers.group.client import output_slot
from ..workers.group.manager import MGPUModel, get_manager
from ..workers.strategies.tdp_preview import preview_region
from ..workers.strategies.tiled import (
    AUTO,
    TileGrid,
    make_grid,
    resolve_counts,
    resolve_time_tiles,
    split_axis,
    upscaled_latent_shape,
)
from ..workers.wire.capabilities import capabilities, check_tdp_preview, check_tdp_time_tiles
from ..workers.wire.checks import check_splittable
from ..workers.wire.machines import machine_sizes, split_device
from ..workers.wire.model_files import config_from_header, read_safetensors_header
from ..workers.wire.requests import DEFAULT_PREVIEW_FRAMES, TdpUpscale
from ..workers.wire.requests import PREVIEW_OFF as OFF
from ..workers.wire.requests import check_preview_mode as check_mode
from ..workers.wire.upscaler_files import check_upscaler_input, describe_upscaler, release_mismatch
from . import comfy
from .convert import conditioning_args, split_latent
from .jobs import run_job

# Lightricks' distilled stage-2 schedule for the TDP stage (Lightricks' LTX-2 release notes).
DEFAULT_SIGMAS = (0.625, 0.4, 0.0)
UPSCALER_FOLDERS = ("latent_upscale_models",)
# Grids offered, "rows x columns" (tiles along height x along width), up to 4 per axis: with the
# default overlap of 5 cells a 2x upscale of a 512x768 stage 1 (32 x 48 cells) leaves tiles of 11+
# cells at 4 per axis; more tiles only shrink each tile's context. Ordered by tile count.
GRIDS = tuple(
    f"{h}x{w}"
    for h, w in sorted(((h, w) for h in range(1, 5) for w in range(1, 5)), key=lambda g: (g[0] * g[1], g[0]))
)
TILE_CHOICES = ("auto", *GRIDS)
_GRID_PATTERN = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")

# Latent cells neighbouring tiles share by default (the node's overlap widget); on the tiny model 2x2
# tiles with it leave no measurable seam (tests/test_tdp_seams.py).
DEFAULT_OVERLAP_CELLS = 5
MAX_OVERLAP_CELLS = 32
# Most spans of frames the node offers (NOTE [time tiles]); 64 auto spans are a 20-minute clip.
MAX_TIME_TILES = 64
# The longest video EmptyLTXVLatentVideo makes (its length maximum, nodes.MAX_RESOLUTION).
MAX_FRAMES = 16384


def parse_tiles(choice: str) -> tuple[int, int]:
    """'auto' -> (AUTO, AUTO); 'RxC' -> (R, C) tiles along (height, width)."""
    if choice.strip().lower() == "auto":
        return AUTO, AUTO
    match = _GRID_PATTERN.match(choice)
    if match is None:
        raise ValueError(f"tiles {choice!r} is not 'auto' or 'RxC' (rows x columns, e.g. '2x2')")
    return int(match.group(1)), int(match.group(2))


def tdp_upscale(
    mgpu_model: MGPUModel,
    positive,
    negative,
    latent: dict,
    upscale_model: str,
    sampler_name: str,
    cfg: float,
    seed: int,
    tiles: str,
    overlap: int,
    sigmas: torch.Tensor | None = None,
    preview: str = OFF,
    preview_frames: int = DEFAULT_PREVIEW_FRAMES,
    time_tiles: int = AUTO,
    node_id: str | None = None,
):
    """TDP Upscaler: upsample the stage-1 `latent` 2x and denoise it in tiles spread over the group's
    GPUs; returns (LATENT,) with the stage-1 audio. Raises ValueError naming the input to change."""
    parts = split_latent(latent)
    tiles_h, tiles_w = parse_tiles(tiles)
    upscaler = comfy.full_path(UPSCALER_FOLDERS, upscale_model)
    header = read_safetensors_header(upscaler)
    upscaler_config = config_from_header(header)
    out_shape = upscaled_latent_shape(tuple(parts.video.shape), upscaler_config)
    check_upscaler_input(upscale_model, upscaler_config, int(parts.video.shape[2]))
    check_mode(preview)
    caps = capabilities(mgpu_model.backend)
    check_tdp_preview(caps, preview, OFF)
    if preview == OFF:  # a preview's grid is the spatial one (tdp_plan.plan_tdp)
        spans = resolve_time_tiles(time_tiles, out_shape[2], overlap)
        check_tdp_time_tiles(caps, spans, out_shape[2])
        split_axis(out_shape[2], spans, overlap, "time")  # ValueError naming what fits
    else:  # the preview's output is the size of its region
        grid = node_grid(out_shape, tiles_h, tiles_w, overlap, mgpu_model)
        region = preview_region(preview, preview_frames, grid, out_shape)
        if region.tile is not None:  # the whole group splits the one tile (sequence parallelism)
            check_splittable(region.shape[2:], mgpu_model.world_size)
        out_shape = region.shape
    schedule = torch.tensor(DEFAULT_SIGMAS) if sigmas is None else sigmas
    pos, frame_rate = conditioning_args(positive, "positive")
    neg = None if cfg == 1.0 else conditioning_args(negative, "negative")[0]
    request = TdpUpscale(
        video=parts.video.float().contiguous(),
        audio=None if parts.audio is None else parts.audio.float().contiguous(),
        positive=pos,
        negative=neg,
        frame_rate=frame_rate,
        sigmas=schedule.float().cpu().contiguous(),
        sampler=sampler_name,
        cfg=cfg,
        seed=seed,
        tiles_h=tiles_h,
        tiles_w=tiles_w,
        tiles_t=time_tiles,
        overlap=overlap,
        upscaler=str(upscaler),
        max_video_tokens=mgpu_model.max_video_tokens,
        preview=preview,
        preview_frames=preview_frames,
        live_preview=comfy.previews_enabled(),
    )
    # The slot only once the request passed its checks: a refused input leaves nothing in /dev/shm.
    out_video = output_slot(out_shape, torch.float32)
    request = dataclasses.replace(request, out_video=out_video)
    mismatch = release_mismatch(upscale_model, header.metadata, mgpu_model.family)
    if mismatch is not None:
        console.warning(mismatch)
    start = time.monotonic()
    results = run_job(mgpu_model, request, node_id=node_id, total=max(1, schedule.numel() - 1))
    console.info(
        run_line(upscale_model, describe_upscaler(upscaler_config), results, time.monotonic() - start)
        + machines_line(results)
    )
    out = {k: v for k, v in latent.items() if k != "noise_mask"}  # the mask was for stage-1 cells
    audio = parts.audio
    if audio is not None and results[0]["audio_frames"] != audio.shape[2]:
        audio = audio[:, :, : results[0]["audio_frames"]].clone()  # a first-frames preview is shorter
    out["samples"] = comfy.nested_tensor([out_video.tensor, audio]) if parts.nested else out_video.tensor
    return (out,)


def node_grid(shape: tuple[int, ...], tiles_h: int, tiles_w: int, overlap: int, model: MGPUModel) -> TileGrid:
    """The grid the workers will use (the preview's output size depends on it); ValueError as theirs."""
    extent = (shape[3], shape[4])
    return make_grid(extent, resolve_counts(tiles_h, tiles_w, extent, overlap), overlap)


def run_line(upscale_model: str, kind: str, results: list[dict], seconds: float) -> str:
    """The console's line for one run: what ran where, and what the warm loop reused."""
    first = results[0]
    rows, cols = first["tiles"]
    spans = first.get("time_tiles", 1)
    what = "the centre tile" if first.get("preview_tile") is not None else f"{rows}x{cols} tiles"
    if spans > 1:
        what += f" x {spans} spans of frames"
    line = (
        f"TDP Upscaler: {Path(upscale_model).stem} ({kind}), {what} on {_count(len(results), 'worker')}, "
        f"{_count(first['steps'], 'step')} in {console.seconds(seconds)}"
    )
    reused = [name.replace("_", " ") for name, flag in first.get("reused", {}).items() if flag]
    return line + (f"; reused the {' and the '.join(reused)}" if reused else "")


def machines_line(results: list[dict]) -> str:
    """Where the tiles ran when the group spans machines (NOTE [machines]): "; tiles per machine: ..."."""
    group = get_manager().group
    if group is None or not group.placement.machines or len(results) != group.world_size:
        return ""
    per_machine = machine_sizes(group.placement.devices)
    for machine in per_machine:
        per_machine[machine] = 0
    for device, result in zip(group.placement.devices, results, strict=True):
        per_machine[split_device(device)[0]] += int(result["tiles_on_rank"])
    return "; tiles per machine: " + ", ".join(f"{m or 'this one'} {n}" for m, n in per_machine.items())


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
