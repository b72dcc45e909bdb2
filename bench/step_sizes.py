"""The step benches' shared sizes and helpers (no engine import: the ComfyUI-engine benches need no
ltx-core): the video latent shapes timed, the audio length, the tiny CPU configuration, the measured
bf16 matrix rate and the median."""

from __future__ import annotations

import time

import torch

# (frames, height, width) in pixels -> latent (F, H, W): 512x768x121 -> 16x16x24 = 6,144 tokens;
# 1024x1536x121 -> 16x32x48 = 24,576 tokens (the LTX-2 VAE and patchifier).
SHAPES = {6144: (1, 128, 16, 16, 24), 24576: (1, 128, 16, 32, 48)}
AUDIO_FRAMES = 126  # 121 frames at 24 fps
TINY = {
    "num_layers": 2,
    "num_attention_heads": 8,
    "attention_head_dim": 16,
    "audio_num_attention_heads": 8,
    "audio_attention_head_dim": 8,
    "cross_attention_dim": 128,
    "audio_cross_attention_dim": 64,
    "caption_channels": 64,
}
TINY_SHAPES = {96: (1, 128, 4, 4, 6)}


def matmul_tflops(device: torch.device, n: int = 8192, repeats: int = 10) -> float:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    torch.cuda.synchronize(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e12


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]
