"""The "tdp_upscale" command: upsample a stage-1 latent 2x and denoise it with tiled data parallelism
(NOTE [tdp tiles] in strategies/tiled.py), or a preview of it (NOTE [tdp preview] in
strategies/tdp_preview.py).

The plan (grid, preview region, output shape) is the same on both engines (strategies/tdp_plan.py);
the engine upsamples and denoises (NOTE [engine seam]); rank 0 writes the video into the output slot.
"""

from __future__ import annotations

from ..strategies.tdp_plan import plan_tdp, tdp_reply
from ..wire.capabilities import check_tdp_time_tiles
from ..wire.checks import check_splittable
from ..wire.requests import TdpUpscale
from .ops import InputRejected, op


@op(TdpUpscale)
def tdp_upscale(job, request: TdpUpscale) -> dict:
    """Returns per rank: grid, tiles and tokens on the rank, and `audio_frames`, how many stage-1
    audio frames go with the result (a first-frames preview is shorter)."""
    engine = job.engine
    try:
        plan = plan_tdp(request)
        check_tdp_time_tiles(engine.capabilities, plan.grid.time_tiles, plan.up_shape[2])
        if plan.centre_tile_only:  # the whole group splits the one tile (sequence parallelism)
            check_splittable(plan.out_shape[2:], job.world_size)
    except ValueError as exc:
        raise InputRejected(str(exc)) from exc
    return {**tdp_reply(plan, request, job.rank, job.world_size), **engine.tdp_upscale(job, request, plan)}
