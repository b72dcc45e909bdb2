"""LTX-2.5's text encoder (Gemma 4 12B with the LTX projection) run by ComfyUI's own code in a rank.

The 12B file loads exactly as CLIPLoader(type ltxv) loads it (comfy.sd.load_clip). ComfyUI builds
Gemma 4 12B from a fixed config, so a file of other widths (the embedded tiny one) is built from
the same classes with the sizes read from its weights; everything else (tokenizer, Gemma's forward,
the token cut, the dual projection) is ComfyUI's. Encoding is CLIPTextEncode's two calls, so the
CONDITIONING is native's. With a LayerSplit (gemma4_layer_split.py) the same model is built with
relays in place of the layers this rank does not hold, from the same classes and detection.
Import only after bootstrap.import_comfyui.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from .gemma4_layer_split import LayerSplit, install_split

# Gemma 4 12B as ComfyUI's Gemma4_12B_Config sizes it; a file with these loads through load_clip.
_GEMMA4_12B_HIDDEN, _GEMMA4_12B_LAYERS = 3840, 48
TOKENIZER_KEY = "tokenizer_json"


def load_gemma4_text_encoder(path: Path, device: torch.device, split: LayerSplit | None = None) -> Any:
    """comfy.sd.CLIP of a Gemma 4 "with projection" file, on `device`; with `split`, holding only
    this rank's layers.

    Every file goes through load_clip's own steps (comfy/sd.py): old quantization layouts turned into
    `comfy_quant` entries, the lm_head key renamed, llama_detect (the file's dtype, its quantization
    record: what makes ComfyUI build an int8 convrot or fp8 file with its quantized ops) and lt.sd_detect
    (the projection's widths and biases). Only the Gemma class differs where ComfyUI's is fixed at 12B's
    sizes (a smaller file) or holds every layer (a split)."""
    import comfy.model_management
    import comfy.sd
    import comfy.utils

    options = {"load_device": device, "offload_device": device}
    sd, metadata = comfy.utils.load_torch_file(str(path), safe_load=True, return_metadata=True)
    hidden, layers = sd["model.embed_tokens.weight"].shape[1], _count_layers(sd)
    is_12b = (hidden, layers) == (_GEMMA4_12B_HIDDEN, _GEMMA4_12B_LAYERS)
    if split is None and is_12b:
        return comfy.sd.load_clip([str(path)], clip_type=comfy.sd.CLIPType.LTXV, model_options=options)
    sd, _ = comfy.utils.convert_old_quants(sd, model_prefix="", metadata=metadata)
    if "lm_head.weight" in sd:  # as load_text_encoder_state_dicts renames it
        sd["model.lm_head.weight"] = sd.pop("lm_head.weight")
    detected = comfy.sd.llama_detect([sd])
    base = _gemma4().Gemma4_12B if is_12b else _gemma4_class_from_weights(sd, _gemma4())
    if split is None:
        return _clip(sd, base, detected, options)
    # Built on the CPU, where the dropped layers' never-written weights take no memory, then moved.
    options["initial_device"] = torch.device("cpu")
    clip = _clip(sd, _with_relays(base, split), detected, options, split)
    comfy.model_management.load_models_gpu([clip.patcher], force_full_load=True)
    return clip


def encode(clip: Any, text: str) -> torch.Tensor:
    """CLIPTextEncode's CONDITIONING tensor [1, tokens, video + audio width], float32 on the CPU.
    ComfyUI's tokens, encoded without the left padding (NOTE [pads skipped] in workers/text/gemma3.py:
    ComfyUI masks the pads out of every prompt token's attention, so the prompt tokens, run alone at
    the positions the padding gives them, have its states within float32 rounding)."""
    tokens = clip.tokenize(text)
    with _positions_after_pads(clip, tokens) as prompt_tokens:
        conditioning = clip.encode_from_tokens_scheduled(prompt_tokens, show_pbar=False)
    return conditioning[0][0].to(device="cpu", dtype=torch.float32)


@contextmanager
def _positions_after_pads(clip: Any, tokens: dict) -> Iterator[dict]:
    """`tokens` without their leading pads, while ComfyUI's Gemma 4 transformer numbers the rest from
    where they stood (its forward takes position_ids; the encode path passes none, so it would count
    from 0). ComfyUI's encode then builds an all-ones attention mask and its token cut keeps them all."""
    encoder = clip.cond_stage_model.gemma3_12b  # LTXAVTEModel's attribute, whichever Gemma it holds
    pad = encoder.special_tokens["pad"]
    key = clip.cond_stage_model.text_encoder_key
    rows = tokens[key]
    first = next((i for i, t in enumerate(rows[0]) if t[0] != pad), 0) if len(rows) == 1 else 0
    if first == 0:  # nothing padded (or a batch of rows, which ComfyUI's LTX tokenizer never makes)
        yield tokens
        return
    row = rows[0]
    transformer = encoder.transformer.model

    def forward(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("position_ids") is None:
            x = kwargs["embeds"]
            kwargs["position_ids"] = torch.arange(first, first + x.shape[1], device=x.device)[None]
        return type(transformer).forward(transformer, *args, **kwargs)

    transformer.forward = forward
    try:
        yield {**tokens, key: [row[first:]]}
    finally:
        del transformer.forward


def _count_layers(sd: dict[str, torch.Tensor]) -> int:
    return 1 + max(int(k.split(".")[2]) for k in sd if k.startswith("model.layers."))


def _gemma4() -> Any:
    from comfy.text_encoders import gemma4

    return gemma4


def _with_relays(base: type, split: LayerSplit) -> type:
    """`base` (a ComfyUI Gemma 4 class) whose transformer holds only `split`'s layers of this rank."""

    class Gemma4HeldLayers(base):
        def __init__(self, config_dict: dict, dtype: Any, device: Any, operations: Any) -> None:
            super().__init__(config_dict, dtype, device, operations)
            install_split(self, split)

    Gemma4HeldLayers.tokenizer = base.tokenizer
    return Gemma4HeldLayers


def _without_projection(clip_class: type) -> type:
    class LTXTextEncoderWithoutProjection(clip_class):
        def __init__(self, device: Any = "cpu", dtype: Any = None, model_options: dict | None = None) -> None:
            super().__init__(device=device, dtype=dtype, model_options=model_options or {})
            self.text_embedding_projection = torch.nn.Identity()

    return LTXTextEncoderWithoutProjection


def _clip(
    sd: dict[str, torch.Tensor],
    model_class: type,
    detected: dict,
    options: dict,
    split: LayerSplit | None = None,
) -> Any:
    """comfy.sd.CLIP as load_text_encoder_state_dicts builds it for LTX with Gemma 4 (`detected`:
    its llama_detect of the file). On ranks > 0 of a split, without the LTX projection: their result
    is thrown away."""
    import comfy.sd
    import comfy.supported_models_base
    import comfy.utils
    from comfy.text_encoders import gemma4, lt

    clip_class = lt.ltxav_te(
        **detected,
        **lt.sd_detect([sd]),
        text_encoder_model=gemma4.gemma4_text_encoder_model(model_class),
        text_encoder_key="gemma4",
    )
    if split is not None and split.rank > 0:
        clip_class = _without_projection(clip_class)
    tokenizer = lt.ltxav_gemma4_tokenizer(gemma4.Gemma4_12B.tokenizer)
    target = comfy.supported_models_base.ClipTarget(tokenizer, clip_class)
    tokenizer_data = {TOKENIZER_KEY: sd[TOKENIZER_KEY]} if TOKENIZER_KEY in sd else {}
    return comfy.sd.CLIP(
        target,
        state_dict=[sd],
        tokenizer_data=tokenizer_data,
        model_options=options,
        parameters=comfy.utils.calculate_parameters(sd),
    )


def _gemma4_class_from_weights(sd: dict[str, torch.Tensor], gemma4: Any) -> type:
    """ComfyUI's Gemma4UnifiedBase with 12B's settings and the sizes the weights have."""
    head_dim = sd["model.layers.0.self_attn.q_norm.weight"].shape[0]
    global_layer = next(  # 12B: every sixth layer is global, its V shared with K (no v_proj)
        i for i in range(_count_layers(sd)) if f"model.layers.{i}.self_attn.v_proj.weight" not in sd
    )
    global_head_dim = sd[f"model.layers.{global_layer}.self_attn.q_norm.weight"].shape[0]
    global_kv_heads = sd[f"model.layers.{global_layer}.self_attn.k_proj.weight"].shape[0] // global_head_dim
    patch_dense = sd["vision_model.patch_dense.weight"]
    vision = dict(gemma4.Gemma4_12B_Config.vision_config) | {
        "model_patch_size": math.isqrt(patch_dense.shape[1] // 3),
        "mm_embed_dim": patch_dense.shape[0],
        "mm_posemb_size": sd["vision_model.pos_embedding"].shape[0],
        "output_proj_dims": sd["multi_modal_projector.embedding_projection.weight"].shape[1],
    }
    audio = dict(gemma4.Gemma4_12B_Config.audio_config) | {
        "output_proj_dims": sd["audio_projector.embedding_projection.weight"].shape[1],
    }
    config_cls = dataclasses.make_dataclass(
        "Gemma4ConfigFromWeights",
        [],
        bases=(gemma4.Gemma4_12B_Config,),
        namespace={
            "head_dim": head_dim,
            "global_head_dim": global_head_dim,
            "num_global_key_value_heads": global_kv_heads,
            "vision_config": vision,
            "audio_config": audio,
            "suppress_tokens": [],  # generation only; 12B's ids lie outside a smaller vocabulary
        },
    )
    sizes = {
        "vocab_size": sd["model.embed_tokens.weight"].shape[0],
        "hidden_size": sd["model.embed_tokens.weight"].shape[1],
        "intermediate_size": sd["model.layers.0.mlp.gate_proj.weight"].shape[0],
        "num_hidden_layers": _count_layers(sd),
        "num_attention_heads": sd["model.layers.0.self_attn.q_proj.weight"].shape[0] // head_dim,
        "num_key_value_heads": sd["model.layers.0.self_attn.k_proj.weight"].shape[0] // head_dim,
    }

    class Gemma4FromWeights(gemma4.Gemma4UnifiedBase):
        def __init__(self, config_dict: dict, dtype: Any, device: Any, operations: Any) -> None:
            super().__init__()
            self._init_model(config_cls(**(sizes | config_dict)), dtype, device, operations)

    Gemma4FromWeights.tokenizer = gemma4.Gemma4UnifiedTokenizer
    return Gemma4FromWeights
