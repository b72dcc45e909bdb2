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
