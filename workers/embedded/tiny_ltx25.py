"""An embedded tiny LTX-2.5, in the released split layout, drawn with ComfyUI's own classes.

ltx-core 1.0.0 has no LTX-2.5, so the modules are ComfyUI's (its LTXAVModel with the 2.5 flags,
CausalDiffusionVAE, AudioVAE, LatentUpsampler, Gemma 4 with the LTX projection) at small widths
(tiny_comfy), with random weights of O(1) contributions, stored in bf16. `make_tiny_ltx25(dir)`
writes ComfyUI's model folders:

- diffusion_models/ltx-2.5-tiny-transformer-bf16.safetensors: the transformer under
  `model.diffusion_model.*` (the text connectors included), metadata "config" {"transformer"}.
  LTX-2.5's own parts: the keyframe absolute position embedding and the video feed-forward without
  bias; with LTX-2.3's gated attention, cross-attention AdaLN and the text projection in the
  text encoder (so the connectors run at each stream's width).
- diffusion_models/ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors (the released
  name, what the 2.5 templates' UNETLoader picks): the same weights with the transformer blocks'
  Linears in ComfyUI's int8 "convrot" format (int8 weight, per-channel `weight_scale`, a `comfy_quant`
  entry per layer), as the released comfy-int8-convrot file.
- text_encoders/gemma4-tiny-with-proj-ltx-2.5.safetensors (tiny_gemma4, bf16) and, under the released
  name gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors, the same Gemma 4 with its layers'
  Linears in int8 convrot, as released. text_encoders/gemma4_e2b_it_int8_convrot.safetensors stands in
  for the templates' prompt enhancer (Gemma 4 E2B) so their graphs validate: it is the int8 Gemma 4
  file again, not an E2B; leave the templates' prompt enhancement off on these files.
- vae/ltx-2.5-video-vae-bf16.safetensors (diffusion decoder, as released),
  vae/ltx-2.5-tiny-video-vae-conv-decoder.safetensors (the conv decoder option),
  vae/ltx-2.5-audio-vae-bf16.safetensors (tiny_ltx25_vae).
- latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors.
- loras/ltx-2.5-tiny-lora.safetensors: a rank-4 LoRA on the transformer blocks' attention.

Same seed, same torch and ComfyUI: the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .released import place_file
from .tiny_comfy import comfyui_for_tiny, random_state
from .tiny_gemma4 import make_tiny_gemma4
from .tiny_ltx25_vae import (
    AUDIO_VAE_FILE_NAME,
    CONV_VIDEO_VAE_FILE_NAME,
    VIDEO_VAE_FILE_NAME,
    tiny_audio_vae_25,
    tiny_conv_video_vae_25,
    tiny_video_vae_25,
)
from .tiny_model import CONV_GAIN, TRANSFORMER_GAIN, _generator, _save, tiny_upsampler_config

TRANSFORMER_FILE_NAME = "ltx-2.5-tiny-transformer-bf16.safetensors"
TRANSFORMER_INT8_FILE_NAME = "ltx-2.5-22b-distilled-transformer-comfy-int8-convrot.safetensors"
UPSCALER_FILE_NAME = "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"
LORA_FILE_NAME = "ltx-2.5-tiny-lora.safetensors"
TEXT_ENCODER_FILE_NAME = "gemma4-tiny-with-proj-ltx-2.5.safetensors"
TEXT_ENCODER_INT8_FILE_NAME = "gemma4-12b-with-proj-ltx-2.5-comfy-int8-convrot.safetensors"
PROMPT_ENHANCER_FILE_NAME = "gemma4_e2b_it_int8_convrot.safetensors"  # a stand-in, see the docstring
DIFFUSION_PREFIX = "model.diffusion_model."

NUM_LAYERS = 2
# Video 8 heads x 16, audio 8 x 8: the head counts SP splits (22B: 32 x 128 and 32 x 64).
VIDEO_NUM_HEADS, VIDEO_HEAD_DIM = 8, 16
AUDIO_NUM_HEADS, AUDIO_HEAD_DIM = 8, 8
VIDEO_DIM = VIDEO_NUM_HEADS * VIDEO_HEAD_DIM
AUDIO_DIM = AUDIO_NUM_HEADS * AUDIO_HEAD_DIM
# ComfyUI's int8 convrot rotates the input features in groups of a power of 4 that divides them
# (released: 256 over 4096-wide layers); 16 divides every tiny block Linear's input.
CONVROT_GROUP_SIZE = 16
LORA_RANK = 4
LORA_TARGETS = ("attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0")


def tiny_transformer_25_config() -> dict[str, Any]:
    """The metadata "config" of the tiny transformer, in the names ComfyUI's LTXAVModel reads."""
    transformer = {
        "_class_name": "AVTransformer3DModel",
        "num_layers": NUM_LAYERS,
        "num_attention_heads": VIDEO_NUM_HEADS,
        "attention_head_dim": VIDEO_HEAD_DIM,
        "cross_attention_dim": VIDEO_DIM,
        "audio_num_attention_heads": AUDIO_NUM_HEADS,
        "audio_attention_head_dim": AUDIO_HEAD_DIM,
        "audio_cross_attention_dim": AUDIO_DIM,
        "caption_channels": VIDEO_DIM,
        "in_channels": 128,
        "audio_in_channels": 128,
        "positional_embedding_theta": 10000.0,
        "positional_embedding_max_pos": [20, 2048, 2048],
        "audio_positional_embedding_max_pos": [20],
        "rope_type": "split",
        "frequencies_precision": "float64",
        "causal_temporal_positioning": True,
        "use_middle_indices_grid": True,
        "timestep_scale_multiplier": 1000,
        "av_ca_timestep_scale_multiplier": 1000.0,
        # LTX-2.3's additions, kept in 2.5.
        "apply_gated_attention": True,
        "cross_attention_adaln": True,
        "caption_proj_before_connector": True,
        "caption_projection_first_linear": False,
        "connector_apply_gated_attention": True,
        "connector_num_attention_heads": VIDEO_NUM_HEADS,
        "connector_attention_head_dim": VIDEO_HEAD_DIM,
        "audio_connector_num_attention_heads": AUDIO_NUM_HEADS,
        "audio_connector_attention_head_dim": AUDIO_HEAD_DIM,
        "connector_num_layers": 2,
        # LTX-2.5's: the video feed-forward has no bias (the keyframe embedding is found by its key).
        "ff_bias": False,
        "audio_ff_bias": True,
    }
    return {"transformer": transformer}


@dataclass(frozen=True)
class TinyLtx25Files:
    """Paths written by `make_tiny_ltx25`, each in ComfyUI's model folder for its kind."""

    transformer: Path
    transformer_int8: Path
    text_encoder: Path
    text_encoder_int8: Path
    prompt_enhancer: Path
    video_vae: Path
    conv_video_vae: Path
    audio_vae: Path
    spatial_upscaler: Path
    lora: Path
    seed: int

    def all(self) -> tuple[Path, ...]:
        return (
            self.transformer,
            self.transformer_int8,
            self.text_encoder,
            self.text_encoder_int8,
            self.prompt_enhancer,
            self.video_vae,
            self.conv_video_vae,
            self.audio_vae,
            self.spatial_upscaler,
            self.lora,
        )


def make_tiny_ltx25_paths(models_dir: Path | str, seed: int = 0) -> TinyLtx25Files:
    """Where `make_tiny_ltx25(models_dir, seed)` writes its files (nothing is written or imported)."""
    root = Path(models_dir)
    return TinyLtx25Files(
        transformer=root / "diffusion_models" / TRANSFORMER_FILE_NAME,
        transformer_int8=root / "diffusion_models" / TRANSFORMER_INT8_FILE_NAME,
        text_encoder=root / "text_encoders" / TEXT_ENCODER_FILE_NAME,
        text_encoder_int8=root / "text_encoders" / TEXT_ENCODER_INT8_FILE_NAME,
        prompt_enhancer=root / "text_encoders" / PROMPT_ENHANCER_FILE_NAME,
        video_vae=root / "vae" / VIDEO_VAE_FILE_NAME,
        conv_video_vae=root / "vae" / CONV_VIDEO_VAE_FILE_NAME,
        audio_vae=root / "vae" / AUDIO_VAE_FILE_NAME,
        spatial_upscaler=root / "latent_upscale_models" / UPSCALER_FILE_NAME,
        lora=root / "loras" / LORA_FILE_NAME,
        seed=seed,
    )


def make_tiny_ltx25(models_dir: Path | str, seed: int = 0) -> TinyLtx25Files:
    """Write every tiny LTX-2.5 file under `models_dir` (ComfyUI's models/ layout); needs a ComfyUI."""
    comfyui_for_tiny()  # before any folder is made: without a ComfyUI nothing is written
    files = make_tiny_ltx25_paths(models_dir, seed)
    for path in files.all():
        path.parent.mkdir(parents=True, exist_ok=True)
    tensors = tiny_transformer_25_tensors(seed)
    config = tiny_transformer_25_config()
    _save(tensors, config, files.transformer)
    _save_int8_convrot(tensors, config, files.transformer_int8)
    make_tiny_gemma4(files.text_encoder, seed, VIDEO_DIM, AUDIO_DIM)
    write_int8_convrot(files.text_encoder, files.text_encoder_int8, is_gemma4_convrot_layer)
    place_file(files.text_encoder_int8, files.prompt_enhancer)
    tiny_video_vae_25(files.video_vae, seed)
    tiny_conv_video_vae_25(files.conv_video_vae, seed)
    tiny_audio_vae_25(files.audio_vae, seed)
    _write_upscaler(files.spatial_upscaler, seed)
    _write_lora(files.lora, tensors, seed)
    return files


def tiny_transformer_25_tensors(seed: int) -> dict[str, torch.Tensor]:
    """Float32 values of the tiny transformer, keyed as in the released file."""
    comfyui_for_tiny()
    from comfy.ldm.lightricks.av_model import LTXAVModel
    from comfy.ops import disable_weight_init

    config = tiny_transformer_25_config()["transformer"]
    model = LTXAVModel(**config, use_keyframes_abs_pos_embedding=True, operations=disable_weight_init)
    return random_state(model, lambda key: DIFFUSION_PREFIX + key, seed, TRANSFORMER_GAIN)


def is_convrot_layer(key: str, weight: torch.Tensor) -> bool:
    """Whether the int8 file quantizes this weight: the blocks' 2-D Linear weights (as released)."""
    return (
        key.startswith(DIFFUSION_PREFIX + "transformer_blocks.")
        and key.endswith(".weight")
        and weight.ndim == 2
        and weight.shape[1] % CONVROT_GROUP_SIZE == 0
    )


def _save_int8_convrot(tensors: dict[str, torch.Tensor], config: dict[str, Any], path: Path) -> None:
    _save_raw(int8_convrot_tensors(tensors, is_convrot_layer), {"config": json.dumps(config)}, path)


def is_gemma4_convrot_layer(key: str, weight: torch.Tensor) -> bool:
    """Whether the int8 Gemma 4 file quantizes this weight: its layers' 2-D Linear weights."""
    return (
        key.startswith("model.layers.")
        and key.endswith("_proj.weight")
        and weight.ndim == 2
        and weight.shape[1] % CONVROT_GROUP_SIZE == 0
    )


def write_int8_convrot(source: Path, path: Path, is_layer) -> Path:
    """`source` again at `path` with the weights `is_layer(key, weight)` picks in ComfyUI's int8 convrot
    format; every other entry and the metadata as they are."""
    from safetensors import safe_open

    with safe_open(str(source), framework="pt") as f:
        tensors = {key: f.get_tensor(key) for key in f.keys()}
        metadata = dict(f.metadata() or {})
    _save_raw(int8_convrot_tensors(tensors, is_layer, keep_dtypes=True), metadata, path)
    return path


def int8_convrot_tensors(tensors: dict[str, torch.Tensor], is_layer, keep_dtypes: bool = False) -> dict:
    """ComfyUI's int8 convrot entries (int8 weight, per-channel `weight_scale`, a `comfy_quant` record)
    for the weights `is_layer` picks, quantized from their bf16 values as a released conversion is; the
    other entries in bf16 (or as stored, `keep_dtypes`)."""
    from comfy.quant_ops import QuantizedTensor

    out: dict[str, torch.Tensor] = {}
    layer_conf = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": CONVROT_GROUP_SIZE}
    conf_bytes = torch.frombuffer(bytearray(json.dumps(layer_conf).encode()), dtype=torch.uint8)
    for key, value in tensors.items():
        if not is_layer(key, value):
            out[key] = value if keep_dtypes or not value.is_floating_point() else value.to(torch.bfloat16)
            continue
        quantized = QuantizedTensor.from_float(
            value.to(torch.bfloat16),
            "TensorWiseINT8Layout",
            per_channel=True,
            convrot=True,
            convrot_groupsize=CONVROT_GROUP_SIZE,
        )
        layer = key.removesuffix(".weight")
        out[key] = quantized._qdata
        out[f"{layer}.weight_scale"] = quantized._params.scale
        out[f"{layer}.comfy_quant"] = conf_bytes.clone()
    return out


def _save_raw(tensors: dict[str, torch.Tensor], metadata: dict[str, str], path: Path) -> None:
    import os

    from safetensors.torch import save_file

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata or None)
    os.replace(tmp, path)


def _write_upscaler(path: Path, seed: int) -> None:
    from comfy.ldm.lightricks.latent_upsampler import LatentUpsampler
    from comfy.ops import disable_weight_init

    config = tiny_upsampler_config()
    upsampler = LatentUpsampler.from_config(config, operations=disable_weight_init)
    _save(random_state(upsampler, lambda key: key, seed, CONV_GAIN), config, path)


def _write_lora(path: Path, transformer: dict[str, torch.Tensor], seed: int) -> None:
    """A rank-4 LoRA on every block's video self-attention, named as the released LTX LoRAs
    (`diffusion_model.<layer>.lora_A/B.weight`, which ComfyUI's LoRA loaders map)."""
    tensors: dict[str, torch.Tensor] = {}
    for block in range(NUM_LAYERS):
        for target in LORA_TARGETS:
            layer = f"diffusion_model.transformer_blocks.{block}.{target}"
            out_dim, in_dim = transformer[f"model.{layer}.weight"].shape
            down = torch.randn((LORA_RANK, in_dim), generator=_generator(seed, layer + ".lora_A"))
            up = torch.randn((out_dim, LORA_RANK), generator=_generator(seed, layer + ".lora_B"))
            # delta = up @ down has std ~ 0.3 / sqrt(in): a visible change, small next to the weight.
            tensors[layer + ".lora_A.weight"] = down / in_dim**0.5
            tensors[layer + ".lora_B.weight"] = up * 0.3 / LORA_RANK**0.5
    _save(tensors, {"lora": {"rank": LORA_RANK, "family": "LTX-2.5"}}, path)
