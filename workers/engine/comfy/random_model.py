"""ComfyUI's LTXAVModel with random weights, held in bf16 or in a released quantized layout (benchmarks).

No file is needed for the 19B / 22B shapes: the model is built by ComfyUI's own classes
(supported_models.LTXAV -> model_base.LTXAV -> LTXAVModel) on the target device from a config dict
(the keys a checkpoint's metadata "config"/"transformer" gives ComfyUI). Quantized formats go the way
ComfyUI's loader takes a quantized file: the model config carries ComfyUI's quant_config, so
pick_operations builds mixed_precision_ops, and the diffusion model loads a state dict in the file's
layout (quantized weight, `weight_scale`, a `comfy_quant` JSON record per layer). The forward then runs
the same ops and comfy_kitchen kernels as for a released file. Import after bootstrap.import_comfyui.

Weight formats (WEIGHT_FORMATS):
- "bf16": every weight in the compute dtype.
- "fp8": "fp8 scaled", as the LTX fp8 files (LTX-2 19B, LTX-2.3 22B templates): float8_e4m3fn weights
  with a float32 per-tensor `weight_scale` (amax / 448) and an `input_scale` of 1.0 on the transformer
  blocks' attention q/k/v/out and feed-forward Linears, audio included; block 0 and the last five stay in
  the compute dtype (ltx-core's fp8 cast; the tiny models, with fewer than 7 blocks, keep block 0 only).
- "fp8_fast": a bf16 file loaded with fp8_matmul (UNETLoader's weight_dtype fp8_e4m3fn_fast): every weight
  stored in float8_e4m3fn without scales, ComfyUI's fp8_ops multiplying in fp8 where the GPU has it.
- "int8": "int8 convrot", as the LTX-2.5 comfy-int8-convrot file: every 2-D Linear weight of the
  transformer blocks in ComfyUI's TensorWiseINT8Layout, per output channel `weight_scale`, Hadamard
  rotation in groups of 256 input features (the largest power of 4 up to 256 that divides every such
  input width, for the tiny shapes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import torch

WEIGHT_FORMATS = ("bf16", "fp8", "fp8_fast", "int8")
# ltx-core's own init scale (engine/ltxcore/bench.py INIT_STD); step time does not depend on the values.
INIT_STD = 0.02
# fp8_matmul's weight dtype on ComfyUI's engine (engine/comfy/model.py FP8_WEIGHT_DTYPE).
FP8_FAST_DTYPE = torch.float8_e4m3fn
BLOCK_PREFIX = "transformer_blocks."
# Which Linears the released fp8 files quantize (ltx-core's fp8 cast; engine/ltxcore/fp8.py holds the same
# list for the ltx-core backend, which this room does not import).
FP8_LINEAR_SUFFIXES = (".to_q.weight", ".to_k.weight", ".to_v.weight", ".to_out.0.weight",
                       "ff.net.0.proj.weight", "ff.net.2.weight")  # fmt: skip
# Blocks the released fp8 files keep unquantized at the end of the stack (with block 0).
FP8_LAST_EXCLUDED = 5
# The released int8 convrot file's rotation group (input features per Hadamard block).
CONVROT_GROUP_SIZE = 256
# The fp8 files' static input scale (a scalar 1.0: activations cast to fp8 as they are).
FP8_INPUT_SCALE = 1.0

# What each release changes over the LTX-2 19B transformer config, in the metadata keys ComfyUI reads
# (comfy/ldm/lightricks/av_model.py, model.py). LTX-2.3 (22B): gated attention in the blocks and the text
# connectors, cross-attention AdaLN with the prompt AdaLN tables, the caption projection moved into the
# text encoder (so the connectors run at each stream's width: video 32 x 128, audio 32 x 64), and 8
# connector layers instead of 2. LTX-2.5 (22B): LTX-2.3's, plus the keyframe absolute position embedding
# and the video feed-forward without bias.
FAMILY_CHANGES: dict[str, dict[str, Any]] = {
    "2": {},
    "2.3": {
        "apply_gated_attention": True,
        "cross_attention_adaln": True,
        "use_prompt_adaln_single": True,
        "caption_proj_before_connector": True,
        "caption_projection_first_linear": False,
        "connector_apply_gated_attention": True,
        "connector_num_layers": 8,
        "connector_num_attention_heads": 32,
        "connector_attention_head_dim": 128,
        "audio_connector_num_attention_heads": 32,
        "audio_connector_attention_head_dim": 64,
    },
}
FAMILY_CHANGES["2.5"] = {
    **FAMILY_CHANGES["2.3"],
    "ff_bias": False,
    "audio_ff_bias": True,
    "use_keyframes_abs_pos_embedding": True,
}


def comfy_random_model(
    config: dict, device: torch.device, dtype: torch.dtype, seed: int, weights: str = "bf16"
) -> Any:
    """A comfy ModelPatcher holding LTXAVModel of `config` on `device`, weights N(0, INIT_STD) in `weights`
    (WEIGHT_FORMATS), everything else in `dtype`; registered with ComfyUI as fully loaded."""
    import comfy.model_management
    import comfy.model_patcher

    model = random_base_model(config, device, dtype, seed, weights)
    patcher = comfy.model_patcher.ModelPatcher(model, load_device=device, offload_device=device)
    # As ComfyModel.load: ComfyUI registers the model as fully loaded on the device it sits on.
    comfy.model_management.load_models_gpu([patcher], force_full_load=True)
    return patcher


def family_config(ltx2_config: dict, family: str) -> dict:
    """`ltx2_config` (an LTX-2 transformer config, 19B or tiny) with `family`'s changes; the connector
    widths follow the config's own stream widths, so a tiny config stays tiny."""
    if family not in FAMILY_CHANGES:
        raise ValueError(f"family {family!r} is not one of {', '.join(FAMILY_CHANGES)}")
    config = {**ltx2_config, **FAMILY_CHANGES[family]}
    if family != "2":
        config.update(
            connector_num_attention_heads=ltx2_config["num_attention_heads"],
            connector_attention_head_dim=ltx2_config["attention_head_dim"],
            audio_connector_num_attention_heads=ltx2_config["audio_num_attention_heads"],
            audio_connector_attention_head_dim=ltx2_config["audio_attention_head_dim"],
        )
    return config


def context_width(config: dict) -> int:
    """Width of the processed text context the model takes (video | audio halves): LTX-2's connectors
    run at caption_channels; with the projection in the text encoder, at each stream's width."""
    if config.get("caption_proj_before_connector", False):
        return int(config["cross_attention_dim"]) + int(config["audio_cross_attention_dim"])
    return 2 * int(config["caption_channels"])


def unet_config(config: dict) -> dict:
    """The unet config ComfyUI's detection would give for a file with `config` as its metadata."""
    return {"image_model": "ltxav", "use_keyframes_abs_pos_embedding": False, **config}


def parameter_shapes(config: dict) -> dict[str, torch.Size]:
    """Every diffusion-model tensor of `config` and its shape, keyed as in a diffusion-model file (built on
    the meta device: no memory, CPU-only machines too)."""
    from comfy.ldm.lightricks.av_model import LTXAVModel
    from comfy.ops import disable_weight_init

    settings = {k: v for k, v in unet_config(config).items() if k != "image_model"}
    model = LTXAVModel(**settings, device=torch.device("meta"), operations=disable_weight_init)
    return {key: value.shape for key, value in model.state_dict().items()}


def count_parameters(config: dict) -> int:
    return sum(shape.numel() for shape in parameter_shapes(config).values())


def quantized_layers(shapes: dict[str, torch.Size], weights: str, num_layers: int) -> dict[str, dict]:
    """{layer name: its comfy_quant record} for the Linears `weights` stores quantized (module docstring)."""
    if weights == "fp8":
        excluded = {0, *range(num_layers - FP8_LAST_EXCLUDED, num_layers)} if num_layers > 6 else {0}
        return {
            key.removesuffix(".weight"): {"format": "float8_e4m3fn"}
            for key in shapes
            if key.startswith(BLOCK_PREFIX)
            and key.endswith(FP8_LINEAR_SUFFIXES)
            and int(key.split(".")[1]) not in excluded
        }
    if weights == "int8":
        linears = [
            k
            for k, s in shapes.items()
            if k.startswith(BLOCK_PREFIX) and k.endswith(".weight") and len(s) == 2
        ]
        group = convrot_group_size([shapes[k][1] for k in linears])
        record = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": group}
        return {k.removesuffix(".weight"): dict(record) for k in linears}
    return {}


def convrot_group_size(in_features: list[int]) -> int:
    """The released group (256) when it divides every input width, else the largest power of 4 that does."""
    group = CONVROT_GROUP_SIZE
    while group > 1 and any(n % group for n in in_features):
        group //= 4
    if group < 4:
        raise ValueError(f"input widths {sorted(set(in_features))} share no power-of-4 convrot group")
    return group


def random_base_model(
    config: dict, device: torch.device, dtype: torch.dtype, seed: int, weights: str = "bf16"
) -> Any:
    """ComfyUI's LTXAV BaseModel of `config` on `device`, random weights in `weights` (WEIGHT_FORMATS),
    the rest in `dtype` (no patcher)."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights {weights!r} is not one of {', '.join(WEIGHT_FORMATS)}")
    if weights == "bf16":
        model = _random_bf16(config, device, dtype, seed)
    elif weights == "fp8_fast":
        model = _random_bf16(config, device, dtype, seed, weight_dtype=FP8_FAST_DTYPE)
    else:
        model = _random_quantized(config, device, dtype, seed, weights)
    model.eval()
    return model


def _random_bf16(
    config: dict, device: torch.device, dtype: torch.dtype, seed: int, weight_dtype: torch.dtype | None = None
) -> Any:
    """Every weight in `dtype`; or stored in `weight_dtype` and computed in `dtype` with ComfyUI's fp8 ops
    (fp8_e4m3fn_fast: load_diffusion_model_state_dict's dtype and fp8_optimizations, as UNETLoader sets)."""
    import comfy.supported_models

    model_config = comfy.supported_models.LTXAV(unet_config(config))
    if weight_dtype is None:
        model_config.set_inference_dtype(dtype, None)
    else:
        model_config.set_inference_dtype(weight_dtype, dtype)
        model_config.optimizations["fp8"] = True
    model = model_config.get_model({}, device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for p in model.diffusion_model.parameters():
            if p.is_floating_point() and p.element_size() == 1:  # fp8: drawn wider, then stored
                p.copy_(torch.empty(p.shape, device=device).normal_(0.0, INIT_STD, generator=generator))
            else:
                p.normal_(0.0, INIT_STD, generator=generator)
    return model


def _random_quantized(config: dict, device: torch.device, dtype: torch.dtype, seed: int, weights: str) -> Any:
    """Built as comfy.sd.load_diffusion_model_state_dict builds a file with `comfy_quant` records: the
    config's quant_config makes mixed_precision_ops, computing in `dtype` (what the loader picks for a
    quantized file on an H200: bf16), then the state dict in the file's layout is loaded."""
    import comfy.supported_models
    import comfy.utils

    shapes = parameter_shapes(config)
    layers = quantized_layers(shapes, weights, int(config["num_layers"]))
    model_config = comfy.supported_models.LTXAV(unet_config(config))
    model_config.quant_config = {"mixed_ops": True}  # what detect_layer_quantization returns for the file
    model_config.set_inference_dtype(dtype, dtype)
    model = model_config.get_model({}, device=device)
    state = dict(_quantized_state(shapes, layers, device, dtype, seed))
    assert comfy.utils.detect_layer_quantization(state, "") == model_config.quant_config
    missing, unexpected = model.diffusion_model.load_state_dict(
        model_config.process_unet_state_dict(state), strict=False
    )
    if missing or unexpected:
        raise RuntimeError(
            f"random {weights} state dict does not fit the model: missing {missing}, unexpected {unexpected}"
        )
    return model


def _quantized_state(
    shapes: dict[str, torch.Size],
    layers: dict[str, dict],
    device: torch.device,
    dtype: torch.dtype,
    seed: int,
) -> Iterator[tuple[str, torch.Tensor]]:
    """The diffusion-model file's tensors, drawn one at a time on `device` (the peak stays one layer over
    the held weights): quantized layers as weight + weight_scale (+ input_scale) + comfy_quant."""
    from comfy.quant_ops import QuantizedTensor

    generator = torch.Generator(device=device).manual_seed(seed)
    for key, shape in shapes.items():
        value = torch.empty(shape, dtype=dtype, device=device).normal_(0.0, INIT_STD, generator=generator)
        layer = key.removesuffix(".weight")
        record = layers.get(layer) if key.endswith(".weight") else None
        if record is None:
            yield key, value
            continue
        if record["format"] == "float8_e4m3fn":
            quantized = QuantizedTensor.from_float(value, "TensorCoreFP8E4M3Layout")
            yield f"{layer}.input_scale", torch.tensor(FP8_INPUT_SCALE, dtype=torch.float32, device=device)
        else:
            quantized = QuantizedTensor.from_float(
                value,
                "TensorWiseINT8Layout",
                per_channel=True,
                convrot=True,
                convrot_groupsize=record["convrot_groupsize"],
            )
        del value
        yield key, quantized._qdata
        yield f"{layer}.weight_scale", quantized._params.scale
        yield (
            f"{layer}.comfy_quant",
            torch.frombuffer(bytearray(json.dumps(record).encode()), dtype=torch.uint8),
        )
