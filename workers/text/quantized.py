"""ComfyUI's quantized text-encoder weights (fp8 "scaled", nvfp4 "mixed" files), read without ComfyUI.

How a ComfyUI file marks a quantized linear layer `<layer>` (first match wins, as comfy.utils /
comfy.ops read them):
1. a `<layer>.comfy_quant` entry: uint8 bytes of JSON {"format": ...};
2. the safetensors metadata `_quantization_metadata`: JSON {"layers": {"<layer>": {"format": ...}}};
3. the older fp8 form: a `scaled_fp8` entry, and `<layer>.scale_weight` beside each fp8 weight.

Formats and their tensors (ComfyUI 0.33 QUANT_ALGOS, comfy_kitchen layouts):
- "float8_e4m3fn" / "float8_e5m2": `weight` [out, in] fp8, `weight_scale` (older: `scale_weight`)
  a scalar; value = weight * scale.
- "nvfp4": `weight` [out, in / 2] uint8, two e2m1 values per byte, the even column in the high
  nibble; `weight_scale` fp8 e4m3 scales of 16-value blocks, in cuBLAS' tiled "block scaling factors"
  layout (tiles of 128 rows x 4 block-columns, each stored as [32][4][4]: row r of a tile at
  (r mod 32) * 16 + (r div 32) * 4); `weight_scale_2` a scalar; value = e2m1 * scale_2 * block scale.
  Rows and columns are padded to multiples of 16 in storage.
`input_scale` entries only serve ComfyUI's quantized-activation matmuls, which text encoders do not
use (full-precision matmul), and are ignored.

ComfyUI dequantizes such a weight at each use into the activations' dtype (float32 for Gemma, see
gemma3.py), so `QuantizedLinear` keeps the stored form and does the same: memory stays at the file's
size, and the values are ComfyUI's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

FP8_FORMATS = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
NVFP4 = "nvfp4"
SUPPORTED_FORMATS = (*FP8_FORMATS, NVFP4)
NVFP4_BLOCK = 16  # values per block scale
TILE_ROWS, TILE_COLS = 128, 4  # cuBLAS block-scale tile: 128 rows x 4 block-columns
# e2m1 code -> value (sign bit 3, then exponent 2 bits, mantissa 1 bit).
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


@dataclass(frozen=True)
class QuantSpec:
    """How one linear layer is stored. tensors: role ("weight", "scale", "block_scale") -> file key."""

    layer: str
    format: str
    tensors: Mapping[str, str]


def find_quantized(
    shapes: Mapping[str, tuple[int, ...]], metadata: Mapping[str, str], read: Callable[[str], torch.Tensor]
) -> dict[str, QuantSpec]:
    """File layer name -> QuantSpec for every quantized layer of a file (see module docstring).
    `read` loads one (small) entry. Raises ValueError for formats this pack cannot dequantize."""
    formats: dict[str, str] = {}
    raw = metadata.get("_quantization_metadata")
    if raw:
        for layer, conf in json.loads(raw).get("layers", {}).items():
            formats[layer] = str(conf.get("format"))
    for key in shapes:
        if key.endswith(".comfy_quant"):
            conf = json.loads(read(key).numpy().tobytes())
            formats[key[: -len(".comfy_quant")]] = str(conf.get("format"))
    if "scaled_fp8" in shapes:
        for key in shapes:
            if key.endswith(".scale_weight"):
                formats.setdefault(key[: -len(".scale_weight")], "float8_e4m3fn")
    specs = {}
    for layer, fmt in formats.items():
        if fmt not in SUPPORTED_FORMATS:
            raise ValueError(
                f"layer {layer} is stored as {fmt!r}; text encoders quantized as {', '.join(SUPPORTED_FORMATS)} "
                "can be read, others cannot: use the bf16 text encoder file"
            )
        if f"{layer}.pre_quant_scale" in shapes:
            raise ValueError(
                f"layer {layer} carries a pre_quant_scale (AWQ smoothing), which is not supported"
            )
        roles = {"weight": f"{layer}.weight"}
        if fmt == NVFP4:
            roles |= {"block_scale": f"{layer}.weight_scale", "scale": f"{layer}.weight_scale_2"}
        else:
            new, old = f"{layer}.weight_scale", f"{layer}.scale_weight"
            roles["scale"] = new if new in shapes else old
        missing = [k for k in roles.values() if k not in shapes]
        if missing:
            raise ValueError(f"quantized layer {layer} ({fmt}) lacks {', '.join(missing)}")
        specs[layer] = QuantSpec(layer, fmt, roles)
    return specs


def logical_shape(spec: QuantSpec, stored: tuple[int, ...]) -> tuple[int, ...]:
    """[out, in] of the layer from the stored weight's shape (padded for nvfp4: a multiple of 16)."""
    return (stored[0], stored[1] * 2) if spec.format == NVFP4 else stored


def block_scale_index(rows: int, blocks: int) -> torch.Tensor:
    """Positions, in a flattened cuBLAS tiled scale tensor, of the scales of a [rows, blocks] grid."""
    r = torch.arange(rows).view(-1, 1)
    c = torch.arange(blocks).view(1, -1)
    tiles_per_row = -(-blocks // TILE_COLS)
    tile = (r // TILE_ROWS) * tiles_per_row + c // TILE_COLS
    inside = (r % 32) * 16 + (r % TILE_ROWS) // 32 * 4 + c % TILE_COLS
    return tile * (TILE_ROWS * TILE_COLS) + inside


def dequantize_nvfp4(
    packed: torch.Tensor, scale: torch.Tensor, block_scale: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """packed [R, C/2] uint8 -> [R, C] in `dtype`: e2m1 value x (scale x block scale), each product
    rounded in `dtype` (ComfyUI's eager order)."""
    rows, cols = packed.shape[0], packed.shape[1] * 2
    codes = torch.stack([packed >> 4, packed & 0x0F], dim=-1).view(rows, cols).long()
    values = torch.tensor(E2M1_VALUES, dtype=dtype, device=packed.device)[codes]
    index = block_scale_index(rows, cols // NVFP4_BLOCK).to(packed.device)
    blocks = block_scale.view(torch.float8_e4m3fn).flatten()[index]
    total = scale.to(dtype) * blocks.to(dtype)  # [R, C / 16]
    return (values.view(rows, -1, NVFP4_BLOCK) * total.unsqueeze(-1)).view(rows, cols)


class QuantizedLinear(nn.Module):
    """A bias-free linear layer over a stored quantized weight, dequantized per call into the input's
    dtype (ComfyUI's full-precision path for text encoders). out_features x in_features logical."""

    def __init__(self, fmt: str, tensors: Mapping[str, torch.Tensor], shape: tuple[int, int]) -> None:
        super().__init__()
        self.format = fmt
        self.out_features, self.in_features = shape
        for role, value in tensors.items():
            self.register_buffer(role, value)

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        if self.format == NVFP4:
            full = dequantize_nvfp4(self.weight, self.scale, self.block_scale, dtype)
            return full[: self.out_features, : self.in_features]
        weight = (
            self.weight.view(FP8_FORMATS[self.format]) if self.weight.dtype == torch.uint8 else self.weight
        )
        return weight.to(dtype) * self.scale.to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.dequantized(x.dtype))
