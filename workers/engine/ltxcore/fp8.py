"""Scaled-fp8 checkpoints (ltx-2-19b-dev-fp8, ltx-2-19b-distilled-fp8): scales folded on load.

Layout of the released files, as ltx-core's fp8_scaled_mm policy and ComfyUI's quant_ops read them:
for each quantized Linear `<p>`, `<p>.weight` is float8_e4m3fn [out, in] (PyTorch layout) and
`<p>.weight_scale` a float32 scalar, the real weight being `weight.float() * weight_scale`;
`<p>.input_scale` is the static activation scale of an fp8 matmul (1.0 in the released files).
Lightricks quantize the attention and feed-forward Linears of transformer blocks 1-42 and keep block 0,
the last five blocks and every layer outside the blocks in bf16. ComfyUI's older "scaled_fp8" layout
spells the scales `<p>.scale_weight` / `<p>.scale_input` and marks the file with a `scaled_fp8`
tensor; both spellings are read.

We fold: every scaled fp8 weight becomes `(weight.float() * scale).to(compute dtype)` while the file
loads, one rounding from the exact product, and the scale keys are dropped. The transformer then runs
plain bf16 Linears: the same GPU memory and speed as the bf16 checkpoint (38 GB per rank for the 19B),
half the disk and page-cache footprint, and LoRAs fuse into bf16 weights exactly as into the bf16
checkpoint's (no re-quantization). The MGPU Loader's fp8_matmul keeps these Linears in fp8 instead
(fp8_linear.py: half the block weights in GPU memory, fp8 matmuls, a re-quantization per LoRA fuse).
Native ComfyUI dequantizes as `bf16(q) * bf16(scale)` (the
scale rounded to bf16 first) or multiplies in fp8, so its fp8 results differ from ours at the
level of that rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from ltx_core.loader import SDOps
from ltx_core.loader.sd_ops import ContentMatching, KeyValueOperationResult, SDKeyValueOperation
from safetensors import safe_open

from ...wire.model_files import SafetensorsHeader

# safetensors dtype names of the fp8 formats torch can upcast.
FP8_FILE_DTYPES = {"F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}
# Weight-scale suffixes: ltx-core / ComfyUI's current layout first, ComfyUI's older "scaled_fp8" one second.
SCALE_SUFFIXES = (".weight_scale", ".scale_weight")
# Companion tensors that mean nothing once the weight is dequantized: static input scales, ComfyUI's
# per-layer quantization config.
DROPPED_SUFFIXES = (".input_scale", ".scale_input", ".comfy_quant")
# ComfyUI's marker tensor of the older layout ("<model prefix>scaled_fp8").
MARKER_SUFFIX = "scaled_fp8"
# The dtype a scaled fp8 weight is folded into when the caller keeps the stored dtype (dtype None):
# the released files keep every unquantized tensor in bf16.
DEFAULT_FOLD_DTYPE = torch.bfloat16
# make_tiny_fp8: float8_e4m3fn's largest finite value (torch.finfo), the per-tensor scale's target.
FP8_E4M3_MAX = float(torch.finfo(torch.float8_e4m3fn).max)
# Which Linears the released files quantize (ltx-core quantization/fp8_cast.py: transformer-block
# attention q/k/v/out and both feed-forward projections, audio ones included).
QUANTIZED_LINEAR_SUFFIXES = (".to_q.weight", ".to_k.weight", ".to_v.weight", ".to_out.0.weight",
                             "ff.net.0.proj.weight", "ff.net.2.weight")  # fmt: skip
BLOCK_PREFIX = "model.diffusion_model.transformer_blocks."
# The smallest amax a scale is made from: an all-zero weight or activation row keeps a finite scale and
# quantizes to zeros (torch's scaled-mm tests use 1e-12).
AMAX_FLOOR = 1e-12


@dataclass(frozen=True)
class ScaledFp8Layout:
    """The scaled fp8 tensors of one checkpoint, by file key.

    scales: fp8 weight key -> its scale key (scalar, or one value per output row). dropped: keys that
    the fold removes (scales, input scales, markers).
    """

    scales: Mapping[str, str]
    dropped: frozenset[str]


def scaled_fp8_layout(header: SafetensorsHeader) -> ScaledFp8Layout | None:
    """The file's scaled fp8 weights, or None when it has none. Raises ValueError for a scale of a
    shape that is neither a scalar nor one value per output row."""
    scales: dict[str, str] = {}
    dropped: set[str] = set()
    for key in header.shapes:
        if key.endswith(DROPPED_SUFFIXES) or key.rsplit(".", 1)[-1] == MARKER_SUFFIX:
            dropped.add(key)
        suffix = next((s for s in SCALE_SUFFIXES if key.endswith(s)), None)
        if suffix is None:
            continue
        weight_key = key[: -len(suffix)] + ".weight"
        if header.dtypes.get(weight_key) not in FP8_FILE_DTYPES:
            continue
        scale_numel = _numel(header.shapes[key])
        rows = header.shapes[weight_key][0] if header.shapes[weight_key] else 1
        if scale_numel not in (1, rows):
            raise ValueError(
                f"{header.path}: {key} holds {scale_numel} values; a weight scale is one value per tensor "
                f"or one per output row ({rows}) of {weight_key}. This fp8 layout is not supported."
            )
        scales[weight_key] = key
        dropped.add(key)
    if not scales:
        return None
    return ScaledFp8Layout(scales=scales, dropped=frozenset(dropped))


def dequantize(weight: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`weight.float() * scale` (scale per tensor, or per output row) rounded once to `dtype`."""
    scale = scale.to(device=weight.device, dtype=torch.float32)
    scale = scale.reshape(()) if scale.numel() == 1 else scale.reshape(-1, *([1] * (weight.dim() - 1)))
    return (weight.to(torch.float32) * scale).to(dtype)


def folding_sd_ops(
    base: SDOps, header: SafetensorsHeader, layout: ScaledFp8Layout, dtype: torch.dtype | None
) -> SDOps:
    """`base` (a component's key mapping) plus the fold: scaled fp8 weights become `dtype` (bf16 when
    None), their scale and input-scale tensors disappear. Scales are read from the file once, here."""
    fold_dtype = DEFAULT_FOLD_DTYPE if dtype is None else dtype
    with safe_open(str(header.path), framework="pt", device="cpu") as f:
        scales = {}
        for weight_key, scale_key in layout.scales.items():
            renamed = base.apply_to_key(weight_key)
            if renamed is not None:
                scales[renamed] = f.get_tensor(scale_key).to(torch.float32)
    dropped = {base.apply_to_key(key) for key in layout.dropped} - {None}

    def fold(key: str, value: torch.Tensor) -> list[KeyValueOperationResult]:
        if key in dropped:
            return []
        scale = scales.get(key)
        if scale is not None and value.dtype in FP8_FILE_DTYPES.values():
            value = dequantize(value, scale, fold_dtype)
        return base.apply_to_key_value(key, value)

    # First in the mapping and matching every key, so it runs instead of base's key-value ops and
    # hands over to them (apply_to_key_value applies only the first matching one).
    first = SDKeyValueOperation(ContentMatching("", ""), fold)
    return replace(base, name=f"{base.name}+fold_scaled_fp8", mapping=(first, *base.mapping))


def block_index(key: str) -> int | None:
    """The transformer block a checkpoint key belongs to, or None outside the blocks."""
    if not key.startswith(BLOCK_PREFIX):
        return None
    return int(key[len(BLOCK_PREFIX) :].split(".", 1)[0])


def is_quantized_in_release(key: str, excluded_blocks: tuple[int, ...]) -> bool:
    if not key.endswith(QUANTIZED_LINEAR_SUFFIXES):
        return False
    block = block_index(key)
    return block is not None and block not in excluded_blocks


def quantize_per_tensor(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = weight.to(torch.float32)
    # An all-zero weight (a zero-initialised layer) keeps a finite scale and stays zero, not NaN.
    scale = FP8_E4M3_MAX / w.abs().amax().clamp(min=AMAX_FLOOR)
    q = torch.clamp(w * scale, -FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale.reciprocal().to(torch.float32)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
