"""Distributed VAE Encode: IMAGE frames -> LTX-2 LATENT, the frame split into bands over the group's GPUs."""

from __future__ import annotations

import logging

import torch

from ..workers.group.client import output_slot
from ..workers.group.manager import MGPUModel
from ..workers.strategies.vae_encode_plan import make_plan
from ..workers.wire import shm
from ..workers.wire.constants import VIDEO_FRAMES_PER_CELL as FRAMES_PER_CELL
from ..workers.wire.constants import VIDEO_PIXELS_PER_CELL as PIXELS_PER_CELL
from ..workers.wire.requests import AUTO, VaeEncode
from ..workers.wire.vae_outputs import encoded_latent_shape as latent_shape
from .job_checks import check_encode
from .jobs import run_job

log = logging.getLogger(__name__)
MAX_TEMPORAL_FRAMES = 4096
RGB = 3


def crop_like_native(pixels: torch.Tensor) -> torch.Tensor:
    """What ComfyUI's VAEEncode encodes of an IMAGE [frames, H, W, C] for LTX-2's VAE, as a view:
    H and W centre-cropped to multiples of 32 (comfy/sd.py VAE.vae_encode_crop_pixels), the channels
    past the third dropped, and the trailing frames past 8k + 1 dropped (VideoVAE.encode). Raises
    ValueError, saying what to change, for what the encoder cannot take."""
    if not isinstance(pixels, torch.Tensor) or pixels.dim() != 4:
        shape = tuple(pixels.shape) if isinstance(pixels, torch.Tensor) else type(pixels).__name__
        raise ValueError(
            f"pixels must be an IMAGE [frames, height, width, 3], got {shape}; connect frames from LoadVideo "
            "(GetVideoComponents), LoadImage or a decode"
        )
    frames, height, width, channels = pixels.shape
    if frames == 0:
        raise ValueError("the IMAGE holds no frames; connect a video or image with at least one frame")
    if min(height, width) < PIXELS_PER_CELL:
        raise ValueError(
            f"frames of {width} x {height} px are smaller than one latent cell ({PIXELS_PER_CELL} x "
            f"{PIXELS_PER_CELL} px); upscale the frames to at least {PIXELS_PER_CELL} px a side"
        )
    if channels < RGB:
        raise ValueError(
            f"the IMAGE has {channels} channel(s); the encoder needs RGB (convert it to RGB first)"
        )
    if not pixels.is_floating_point():
        raise ValueError(f"IMAGE values must be floats in 0..1, got dtype {pixels.dtype}")
    kept = 1 + (frames - 1) // FRAMES_PER_CELL * FRAMES_PER_CELL
    if kept != frames:
        log.warning(
            "Distributed VAE Encode: LTX-2 encodes 8k+1 frames; dropping the last %d of %d frames, as "
            "VAEEncode does",
            frames - kept,
            frames,
        )
    h, w = height // PIXELS_PER_CELL * PIXELS_PER_CELL, width // PIXELS_PER_CELL * PIXELS_PER_CELL
    if (h, w) != (height, width):
        log.warning(
            "Distributed VAE Encode: LTX-2 encodes sides in multiples of %d px; centre-cropping %d x %d px to "
            "%d x %d, as VAEEncode does",
            PIXELS_PER_CELL, width, height, w, h,
        )  # fmt: skip
    top, left = (height - h) // 2, (width - w) // 2
    return pixels[:kept, top : top + h, left : left + w, :RGB]


def check_finite(pixels: torch.Tensor, frames_per_step: int = 16) -> None:
    """Refuse NaN or infinite values, a few frames at a time (no mask of the whole clip in memory)."""
    for start in range(0, pixels.shape[0], frames_per_step):
        finite = torch.isfinite(pixels[start : start + frames_per_step]).flatten(1).all(dim=1)
        if not bool(finite.all()):
            bad = start + int((~finite).nonzero()[0, 0])
            raise ValueError(
                f"the IMAGE holds NaN or infinite values (first in frame {bad}); fix the node that made it"
            )


def encode_pixels(
    mgpu_model: MGPUModel, pixels: torch.Tensor, temporal_size: int = AUTO, node_id: str | None = None
):
    """Distributed VAE Encode: (LATENT,) of the frames `pixels`, cropped as VAEEncode crops them and
    encoded in bands over the group's GPUs."""
    frames = crop_like_native(pixels)
    shape = latent_shape(tuple(frames.shape))
    plan = make_plan(shape[2:], mgpu_model.world_size, temporal_size)
    check_encode(mgpu_model, frames, plan)  # memory, before any allocation (and before reading it all)
    check_finite(frames)
    out = output_slot(shape, torch.float32)  # ranks write their slabs into it
    try:
        request = VaeEncode(pixels=frames, temporal_frames=temporal_size, out_latent=out)
        run_job(mgpu_model, request, node_id=node_id, total=len(plan.chunks))
    finally:  # also when the group could not even start: no segment outlives the node call
        shm.unlink(out.spec.name)
    return ({"samples": out.tensor},)
