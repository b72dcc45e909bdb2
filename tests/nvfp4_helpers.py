"""Writing NVFP4 weights for the text-encoder tests (ComfyUI's files come from its own tools)."""

from __future__ import annotations

import torch

from ltx2_mgpu.workers.text.quantized import (
    E2M1_VALUES,
    NVFP4_BLOCK,
    TILE_COLS,
    TILE_ROWS,
    block_scale_index,
)


def quantize_nvfp4_for_tests(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """A round-to-nearest NVFP4 encoding of `weight` [R, C] (C a multiple of 16) in the stored layout
    above: {"weight", "block_scale", "scale"}. For tests; ComfyUI's files come from its own tools."""
    rows, cols = weight.shape
    lut = torch.tensor(E2M1_VALUES[:8])
    scale = weight.abs().amax().float() / (448.0 * 6.0)  # e4m3 max x e2m1 max
    blocks = weight.float().view(rows, -1, NVFP4_BLOCK)
    block_scale = (blocks.abs().amax(-1) / 6.0 / scale).to(torch.float8_e4m3fn)
    scaled = blocks / (scale * block_scale.float()).clamp(min=1e-30).unsqueeze(-1)
    codes = ((scaled.abs().unsqueeze(-1) - lut).abs().argmin(-1) + 8 * (scaled < 0)).view(rows, cols)
    packed = (codes[:, 0::2] << 4 | codes[:, 1::2]).to(torch.uint8)
    padded = (-(-rows // TILE_ROWS) * TILE_ROWS, -(-(cols // NVFP4_BLOCK) // TILE_COLS) * TILE_COLS)
    tiled = torch.zeros(padded).to(torch.float8_e4m3fn)
    tiled.view(-1)[block_scale_index(rows, cols // NVFP4_BLOCK).flatten()] = block_scale.flatten()
    return {"weight": packed, "block_scale": tiled, "scale": scale.reshape(())}
