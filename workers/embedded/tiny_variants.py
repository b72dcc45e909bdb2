"""Variants of the tiny checkpoint for tests and benchmarks: its fp8 twin in the released fp8 layout and
LoRAs in the released LoRA layout. Files only; nothing here runs in a worker's job.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ..engine.ltxcore.fp8 import is_quantized_in_release, quantize_per_tensor
from ..wire.lora_files import ALPHA_SUFFIX, CHECKPOINT_PREFIX, LORA_PREFIX
from ..wire.model_files import read_safetensors_header


def make_tiny_fp8(
    checkpoint: Path | str, out_path: Path | str, excluded_blocks: tuple[int, ...] = (0,)
) -> Path:
    """Write an fp8 variant of `checkpoint` in the released fp8 layout: the block Linears that Lightricks
    quantize become float8_e4m3fn with a float32 `.weight_scale` (amax / 448, ltx-core's
    quantize_weight_to_fp8_per_tensor) and a `.input_scale` of 1.0; blocks in `excluded_blocks` and
    every other tensor stay as stored. (The 19B files exclude blocks 0 and 43-47; the 2-block tiny
    model keeps block 0 so both kinds of block are exercised.) The metadata keeps "config" and adds
    ComfyUI's `_quantization_metadata`, so native ComfyUI treats the layers as fp8 too."""

    def fp8(key: str, value: torch.Tensor) -> dict[str, torch.Tensor]:
        q, scale = quantize_per_tensor(value)
        layer = key[: -len(".weight")]
        one = torch.tensor(1.0, dtype=torch.float32)
        return {key: q, f"{layer}.weight_scale": scale, f"{layer}.input_scale": one}

    return _write_quantized(checkpoint, out_path, excluded_blocks, "float8_e4m3fn", fp8)


def make_tiny_nvfp4(
    checkpoint: Path | str, out_path: Path | str, excluded_blocks: tuple[int, ...] = (0,)
) -> Path:
    """Write an nvfp4 variant of `checkpoint`: the block Linears make_tiny_fp8 quantizes become ComfyUI's
    nvfp4 layout (comfy_kitchen's quantizer: packed fp4 data, fp8 block scales as `.weight_scale`, a
    float32 `.weight_scale_2`), announced in `_quantization_metadata` as ComfyUI reads it. ComfyUI
    computes these layers by dequantizing where the device has no fp4 matmul (CPU workers)."""
    from comfy_kitchen.tensor import QuantizedTensor

    def nvfp4(key: str, value: torch.Tensor) -> dict[str, torch.Tensor]:
        quantized = QuantizedTensor.from_float(value.float(), "TensorCoreNVFP4Layout")
        return {k: v.contiguous() for k, v in quantized.state_dict(key).items()}

    return _write_quantized(checkpoint, out_path, excluded_blocks, "nvfp4", nvfp4)


def _write_quantized(checkpoint, out_path, excluded_blocks, layer_format: str, quantize) -> Path:
    """`checkpoint` with each block Linear weight the release quantizes replaced by `quantize(key,
    weight)`'s tensors, announced as `layer_format` in ComfyUI's `_quantization_metadata`."""
    header = read_safetensors_header(checkpoint)
    out_path = Path(out_path)
    tensors: dict[str, torch.Tensor] = {}
    layers: dict[str, dict[str, str]] = {}
    with safe_open(str(checkpoint), framework="pt", device="cpu") as f:
        for key in f.keys():
            value = f.get_tensor(key)
            if is_quantized_in_release(key, excluded_blocks):
                tensors.update(quantize(key, value))
                layers[key[: -len(".weight")]] = {"format": layer_format}
            else:
                tensors[key] = value
    metadata = dict(header.metadata)
    metadata["_quantization_metadata"] = json.dumps({"format_version": "1.0", "layers": layers})
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    os.replace(tmp, out_path)
    return out_path


def make_tiny_lora(
    path: Path | str,
    checkpoint: Path | str,
    rank: int = 4,
    seed: int = 0,
    alpha: float | None = None,
    prefixes: tuple[str, ...] = ("transformer_blocks.",),
) -> Path:
    """Write a LoRA for `checkpoint` in the released layout: bf16 `diffusion_model.<name>.lora_A/B.weight`
    for every attention q/k/v/out and feed-forward Linear under `prefixes` (as the distilled LoRA
    covers all of them), random A and B sized so B @ A is about a third of the weights (std 0.5/sqrt(in)
    against the tiny model's 1.5/sqrt(in)). `alpha`: also write `.alpha` scalars (kohya / ComfyUI style)."""
    header = read_safetensors_header(checkpoint)
    gen = torch.Generator().manual_seed(seed)
    tensors: dict[str, torch.Tensor] = {}
    for key in sorted(header.shapes):
        name = key[len(CHECKPOINT_PREFIX) : -len(".weight")] if key.startswith(CHECKPOINT_PREFIX) else ""
        if not name.startswith(prefixes) or not name.endswith(_LINEAR_NAMES):
            continue
        out_features, in_features = header.shapes[key]
        stem = LORA_PREFIX + name
        tensors[stem + ".lora_A.weight"] = (
            torch.randn(rank, in_features, generator=gen) / in_features**0.5
        ).to(torch.bfloat16)
        tensors[stem + ".lora_B.weight"] = (
            torch.randn(out_features, rank, generator=gen) * 0.5 / rank**0.5
        ).to(torch.bfloat16)
        if alpha is not None:
            tensors[stem + ALPHA_SUFFIX] = torch.tensor(float(alpha))
    path = Path(path)
    save_file(tensors, str(path))
    return path


_LINEAR_NAMES = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")
