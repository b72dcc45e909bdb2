"""What kind of model file a safetensors header holds, named as a user knows it, from the keys ComfyUI's
own detection reads (comfy/model_detection.py, comfy/sd.py VAE and detect_te_model, the latent upscale
loader). For messages that refuse a file picked in the wrong slot: "X is an LTX audio VAE, not ...".
Pure: key names only.
"""

from __future__ import annotations

from collections.abc import Iterable

DIFFUSION_PREFIXES = ("model.diffusion_model.", "")
# (kind, keys any of which tells it), in the order they are tried: a full checkpoint before its parts.
_KINDS = (
    ("an LTX transformer", ("audio_adaln_single.linear.weight",)),
    ("an LTX-2.5 video VAE (diffusion decoder)", ("decoder.conv_in_x_t.weight",)),
    ("an LTX video VAE", ("decoder.up_blocks.0.res_blocks.0.conv1.conv.weight",)),
    (
        "an LTX audio VAE",
        ("vocoder.resblocks.0.convs1.0.weight", "vocoder.vocoder.resblocks.0.convs1.0.weight"),
    ),
    ("an LTX latent upscaler", ("post_upsample_res_blocks.0.conv2.bias",)),
)


def describe_kind(keys: Iterable[str]) -> str:
    """ "an LTX transformer", "an LTX audio VAE", "a Gemma 4 text encoder", "a LoRA", ... for the keys of
    a file; "a file none of ComfyUI's LTX loaders recognises" when nothing matches."""
    keys = set(keys)
    for kind, probes in _KINDS:
        if any(prefix + probe in keys for probe in probes for prefix in DIFFUSION_PREFIXES):
            if kind == "an LTX transformer" and any(k.startswith("vae.") for k in keys):
                return "an LTX checkpoint (transformer with its VAEs)"
            return kind
    if any(k.startswith("model.layers.") and k.endswith(".layer_scalar") for k in keys):
        with_projection = any(k.startswith("text_embedding_projection.") for k in keys)
        return "a Gemma 4 text encoder" + (" with the LTX projection" if with_projection else "")
    if "model.layers.0.self_attn.q_norm.weight" in keys:
        return "a Gemma 3 text encoder"
    if any(
        k.endswith((".lora_A.weight", ".lora_down.weight", ".lora_B.weight", ".lora_up.weight")) for k in keys
    ):
        return "a LoRA"
    if any(k.startswith("text_embedding_projection.") for k in keys):
        return "an LTX text projection"
    return "a file none of ComfyUI's LTX loaders recognises"
