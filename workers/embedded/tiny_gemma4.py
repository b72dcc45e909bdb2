"""The tiny LTX-2.5 text encoder: Gemma 4 "12B unified" at small widths with LTX's projection.

Built with ComfyUI's Gemma 4 classes from a config that keeps 12B's structure (48 layers: five
sliding-window layers then a global one whose V is its K, q/k/v norms, partial rope on the global
layers, the encoder-free vision and audio embedders) and shrinks the widths. Saved as ComfyUI's
released `gemma4-12b-with-proj-ltx-2.5` file is laid out: the language model under `model.`, the
embedders and projectors, the dual text projection under `text_embedding_projection.` (video 128
wide, audio 64: the tiny transformer's stream widths) and the tokenizer as the `tokenizer_json`
entry, so no download is needed. The tokenizer is tiny_gemma's character-level one (Gemma's
special ids: <pad> 0, <bos> 2).

ComfyUI's CLIPLoader detects this file as Gemma 4 12B (layer 47 present, no v_proj on global
layer 5) but builds Gemma from the fixed 12B config (3840 wide), so it cannot load the small
widths; `comfy_text_encoder_target()` gives ComfyUI's own LTX text-encoder class at the file's
sizes for tests and ranks (the way tests already run ComfyUI's Gemma 3 at the tiny sizes).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from .tiny_comfy import comfyui_for_tiny, random_state
from .tiny_gemma import tiny_tokenizer_json

TOKENIZER_KEY = "tokenizer_json"
# Gemma 4 12B: 48 layers, 3840 wide, 16 heads of 256 (global 512), 8 KV heads (global 1).
NUM_LAYERS = 48
HIDDEN_SIZE = 16
INTERMEDIATE_SIZE = 32
NUM_HEADS, NUM_KV_HEADS, HEAD_DIM, GLOBAL_HEAD_DIM = 2, 1, 8, 16
VOCAB_SIZE = 256
# Encoder-free embedders, shrunk (12B: 48-px merged patches, 3840-wide embeddings).
VISION_CONFIG = {
    "model_patch_size": 4,
    "patch_size": 2,
    "pooling_kernel_size": 2,
    "mm_embed_dim": 16,
    "mm_posemb_size": 16,
    "output_proj_dims": 16,
    "rms_norm_eps": 1e-6,
}
AUDIO_CONFIG = {"audio_samples_per_token": 640, "output_proj_dims": 8, "rms_norm_eps": 1e-6}
LINEAR_GAIN = 1.0


def tiny_gemma4_config_overrides() -> dict[str, Any]:
    """Fields of ComfyUI's Gemma4_12B_Config that the tiny encoder changes (sizes only)."""
    return {
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN_SIZE,
        "intermediate_size": INTERMEDIATE_SIZE,
        "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": NUM_HEADS,
        "num_key_value_heads": NUM_KV_HEADS,
    }


def tiny_gemma4_model_class() -> type:
    """ComfyUI's Gemma 4 12B model class (Gemma4UnifiedBase) at the tiny sizes."""
    comfyui_for_tiny()
    from comfy.text_encoders import gemma4

    base = gemma4.Gemma4_12B_Config
    # Class attributes that are not dataclass fields (head sizes, embedder configs) are overridden here.
    config_cls = dataclasses.make_dataclass(
        "TinyGemma4Config",
        [],
        bases=(base,),
        namespace={
            "head_dim": HEAD_DIM,
            "global_head_dim": GLOBAL_HEAD_DIM,
            "vision_config": VISION_CONFIG,
            "audio_config": AUDIO_CONFIG,
            "suppress_tokens": [],
        },
    )
    overrides = tiny_gemma4_config_overrides()

    class TinyGemma4(gemma4.Gemma4UnifiedBase):
        def __init__(self, config_dict, dtype, device, operations):
            super().__init__()
            self._init_model(config_cls(**(overrides | config_dict)), dtype, device, operations)

    TinyGemma4.tokenizer = gemma4.Gemma4UnifiedTokenizer
    return TinyGemma4


def comfy_text_encoder_target(state_dict: dict[str, torch.Tensor]) -> tuple[type, type]:
    """(LTX text-encoder class, tokenizer class) as CLIPLoader(type ltxv) builds them for Gemma 4
    12B with projection, with the tiny Gemma 4 in place of the fixed 12B one."""
    comfyui_for_tiny()
    from comfy.text_encoders import gemma4, lt

    clip = lt.ltxav_te(
        **lt.sd_detect([state_dict]),
        text_encoder_model=gemma4.gemma4_text_encoder_model(tiny_gemma4_model_class()),
        text_encoder_key="gemma4",
    )
    tokenizer = lt.ltxav_gemma4_tokenizer(gemma4.Gemma4_12B.tokenizer)
    return clip, tokenizer


def make_tiny_gemma4(out_path: Path | str, seed: int, video_dim: int, audio_dim: int) -> Path:
    """Write the tiny Gemma 4 text encoder with its projection to the transformer's stream widths
    (`video_dim`, `audio_dim`) and its tokenizer, to `out_path`."""
    model = tiny_gemma4_model_class()({}, torch.float32, "cpu", _ops())
    return _write_with_projection(model, Path(out_path), seed, video_dim, audio_dim, "cpu")


def make_gemma4_12b(out_path: Path | str, seed: int, video_dim: int, audio_dim: int, device: str) -> Path:
    """Gemma 4 12B at its released sizes (ComfyUI's own Gemma4_12B: 3840 wide, 48 layers, vision
    and audio embedders), random weights drawn on `device`, in make_tiny_gemma4's layout and with
    its tokenizer: the file ComfyUI's and the ranks' 12B-only load paths take (about 24 GB in
    bfloat16; a GPU check, no release file can be downloaded here)."""
    comfyui_for_tiny()
    from comfy.text_encoders import gemma4

    with torch.device("meta"):
        model = gemma4.Gemma4_12B({}, torch.bfloat16, "meta", _ops())
    return _write_with_projection(model, Path(out_path), seed, video_dim, audio_dim, device)


def _write_with_projection(
    model: torch.nn.Module, path: Path, seed: int, video_dim: int, audio_dim: int, device: str
) -> Path:
    """`model`'s random weights under `model.`/embedders' keys, the LTX dual projection from all
    hidden states (width x (layers + 1)) to the streams' widths, and the tokenizer, as one file."""
    from ..text.text_tokenizer import tokenizer_json_bytes

    config = model.model.config
    stored = random_state(model, lambda key: key, seed, LINEAR_GAIN, device, torch.bfloat16)
    projection_in = config.hidden_size * (config.num_hidden_layers + 1)
    for name, width in (("video", video_dim), ("audio", audio_dim)):
        with torch.device("meta"):
            projection = torch.nn.Linear(projection_in, width)
        prefix = f"text_embedding_projection.{name}_aggregate_embed."
        stored |= random_state(
            projection, lambda key, prefix=prefix: prefix + key, seed, LINEAR_GAIN, device, torch.bfloat16
        )
    stored = {k: v.cpu() for k, v in stored.items()}
    tokenizer = tokenizer_json_bytes(tiny_tokenizer_json())
    stored[TOKENIZER_KEY] = torch.frombuffer(bytearray(tokenizer), dtype=torch.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    _save_mixed(stored, path)
    return path


def _ops() -> Any:
    from comfy.ops import disable_weight_init

    return disable_weight_init


def _save_mixed(tensors: dict[str, torch.Tensor], path: Path) -> None:
    # tiny_model._save would cast the uint8 tokenizer bytes to bf16; no config: ComfyUI's loader
    # reads none for Gemma (it uses 12B's settings).
    import os

    from safetensors.torch import save_file

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
    os.replace(tmp, path)
