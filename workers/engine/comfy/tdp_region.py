"""The TDP Upscaler's preview on ComfyUI's engine (NOTE [tdp preview] in strategies/tdp_preview.py):
ComfyUI's sampler steps the whole upscaled latent, so the initial noise and every draw of an ancestral
sampler are the full run's, cell for cell; only the model call is cut to the preview's region.

RegionCondBatch is a CALC_COND_BATCH wrapper (the seam TiledCondBatch uses). Per model call it hands
`inner` the region of the sampler's x as if it were the whole video (the noise mask and the latent
shapes cut alike): for the first frames a TiledCondBatch over the region's frames (each tile then sees
the positions it has in the full run), for a centre tile ComfyUI's own cond batch on the tile, on a
patcher that splits the tile over the group (sequence parallelism; the tile starts at position zero as
every tile does). Every cell outside the region is returned as it came in: the prediction of a clean
latent equal to the input leaves it where it is, and it is never output. Streams besides the video
(the held audio) come from `inner`.
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ...strategies.tdp_preview import PreviewRegion
from .tiled_cond_batch import pack, tile_cond, unpack

CondBatch = Callable[..., list[torch.Tensor]]  # (executor, model, conds, x, timestep, model_options)


class RegionCondBatch:
    """A WrappersMP.CALC_COND_BATCH wrapper computing `region` of a latent of `latent_shapes` (video
    first); `inner`: the cond batch for the region (None: ComfyUI's own, the executor)."""

    def __init__(
        self, region: PreviewRegion, latent_shapes: Sequence[torch.Size], inner: CondBatch | None = None
    ) -> None:
        self.region = region
        self.shapes = [torch.Size(s) for s in latent_shapes]
        self.inner = inner

    def __call__(
        self, executor, model, conds: list, x_in: torch.Tensor, timestep: torch.Tensor, model_options: dict
    ) -> list[torch.Tensor]:
        streams = unpack(x_in, self.shapes)
        region_x, region_shapes = pack([self.region.cut(streams[0]).contiguous(), *streams[1:]])
        region_conds = [
            None if c is None else [tile_cond(d, self.region.cut, self.shapes[0], region_shapes) for d in c]
            for c in conds
        ]
        run = executor if self.inner is None else lambda *args: self.inner(executor, *args)
        outputs = run(model, region_conds, region_x, timestep, model_options)
        full = []
        for output in outputs:
            parts = unpack(output, region_shapes)
            video = streams[0].clone()
            self.region.cut(video).copy_(parts[0])
            full.append(pack([video, *parts[1:]])[0])
        return full


def region_shapes(region: PreviewRegion, latent_shapes: Sequence[torch.Size]) -> list[torch.Size]:
    """The latent shapes the region's model calls see: its video, the other streams whole."""
    return [torch.Size(region.shape), *(torch.Size(s) for s in latent_shapes[1:])]
