"""Live previews: one latent frame of the current x0, small enough to send with every progress report."""

from __future__ import annotations

import torch


def preview_payload(video: torch.Tensor) -> dict:
    """x0 video latent [B, C, F, H, W] -> the middle frame of the first item as float16 bytes.

    For a 1024x1536 video that is 128 x 32 x 48 x 2 bytes = 393 KB per step; the UI process turns it
    into RGB with ComfyUI's own latent-to-RGB factors (nodes/comfy.py).
    """
    frame = video[0, :, video.shape[2] // 2].to(device="cpu", dtype=torch.float16).contiguous()
    return {"shape": list(frame.shape), "data": frame.numpy().tobytes()}


def step_callbacks(job, enabled: bool):
    """(on_denoised, on_step) for sampling.sample: rank 0 keeps the latest x0 preview when `enabled`,
    every step reports progress (with that preview) and agrees on Cancel at the step boundary."""
    latest: dict[str, dict] = {}

    def on_denoised(step: int, total: int, denoised: list[torch.Tensor]) -> None:
        if enabled and job.rank == 0:
            latest["preview"] = preview_payload(denoised[0])

    def on_step(step: int, total: int, x: list[torch.Tensor]) -> None:
        job.progress(step, total, **({"preview": latest.pop("preview")} if "preview" in latest else {}))
        job.check_cancel()

    return on_denoised, on_step
