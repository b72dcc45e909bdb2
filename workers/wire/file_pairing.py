"""Refusals of files that do not fit each other or ComfyUI, from safetensors headers alone.

The UI side calls these before any worker starts (the loader, MGPU LoRA, MGPU Text Encode), so a
wrong pick fails at the node that made it, naming both files and what would fit; nothing is loaded.

What tells the releases apart (the same keys ComfyUI's own detection and loaders read):
- LoRAs: LTX-2's transformer holds the caption projections (`caption_projection`,
  `audio_caption_projection`); LTX-2.3 moved them into the text encoder and added gated attention
  (`to_gate_logits`) and the prompt AdaLN (`prompt_adaln_single`). A LoRA that changes layers only one
  release has, or whose metadata names its release, is for that release.
- Text encoders: LTX-2.5 encodes with Gemma 4 carrying the projection (the "with-proj" file); LTX-2 and
  LTX-2.3 encode with Gemma 3 and take the projection from the checkpoint.
- Formats: ComfyUI 0.33 reads safetensors with plain dtypes or its own `comfy_quant` formats
  (comfy/quant_ops.py QUANT_ALGOS); bitsandbytes files need other loaders; GGUF files load through the
  ComfyUI-GGUF pack (gguf_checks.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .file_metadata import QUANTIZATION_KEY, config_section, metadata_config, parse_json_object
from .gguf_checks import check_gguf_model
from .gguf_files import is_gguf_file
from .model_family import LTX2, LTX23, LTX25, detect_model_family
from .model_files import SafetensorsHeader, read_safetensors_header

# Layer names (after the LoRA's `diffusion_model.` prefix) that only some releases have.
LTX2_ONLY_LAYERS = ("caption_projection.", "audio_caption_projection.")
LTX23_ON_LAYERS = ("prompt_adaln_single.", "audio_prompt_adaln_single.", ".to_gate_logits.")
# ComfyUI 0.33's quantization formats (comfy/quant_ops.py QUANT_ALGOS; mxfp8 where torch has it).
COMFY_QUANT_FORMATS = (
    "float8_e4m3fn",
    "float8_e5m2",
    "nvfp4",
    "mxfp8",
    "int8_tensorwise",
    "convrot_w4a4",
    "asym_w4a8_int8",
)
# bitsandbytes' 4-bit records (what bnb's serialisation writes beside each packed weight).
BNB_SUFFIXES = (".absmax", ".quant_map", ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4")
# The text encoder each release's templates load.
TEXT_ENCODER_FOR = {
    LTX2: "Gemma 3 12B (gemma_3_12B_it)",
    LTX23: "Gemma 3 12B (gemma_3_12B_it)",
    LTX25: "Gemma 4 12B with projection (gemma4-12b-with-proj-ltx-2.5)",
}
GEMMA4_PROJECTION_KEY = "text_embedding_projection.video_aggregate_embed.weight"


def check_comfy_readable(path: str | Path) -> SafetensorsHeader:
    """The header of `path` when ComfyUI 0.33 can read its weight format; ValueError naming the file
    and its format otherwise."""
    path = Path(path)
    if is_gguf_file(path):  # read by the ComfyUI-GGUF pack's loader (gguf_checks.py)
        return check_gguf_model(path)
    header = read_safetensors_header(path)
    bnb = next((k for k in header.shapes if k.endswith(BNB_SUFFIXES)), None)
    if bnb is not None:
        raise ValueError(
            f"{path.name} is a bitsandbytes 4-bit file ({bnb}), a format ComfyUI 0.33 cannot read; pick the "
            "release's bf16, fp8 or int8 .safetensors file instead"
        )
    unknown = sorted(set(_quant_formats(header)) - set(COMFY_QUANT_FORMATS))
    if unknown:
        raise ValueError(
            f"{path.name} is quantized as {', '.join(unknown)}, a format ComfyUI 0.33 cannot read (it reads "
            f"{', '.join(COMFY_QUANT_FORMATS)}); pick a file in one of those formats or bf16"
        )
    return header


def _quant_formats(header: SafetensorsHeader) -> list[str]:
    """The formats of the `_quantization_metadata` record ComfyUI's quantized files carry in metadata
    (the per-layer `comfy_quant` tensors repeat it; reading the metadata needs no tensor bytes)."""
    raw = header.metadata.get(QUANTIZATION_KEY)
    if raw is None:
        return []
    record = parse_json_object(raw)
    if record is None:
        return ["an unreadable _quantization_metadata"]
    layers = config_section(record, "layers")
    return [str(conf.get("format", "?")) for conf in layers.values() if isinstance(conf, Mapping)]


def lora_release(lora: SafetensorsHeader) -> str | None:
    """The release a LoRA file is for, from its metadata or the layers it changes; None when nothing in
    the header tells (a LoRA on the layers every release shares)."""
    family = config_section(metadata_config(lora.metadata), "lora").get("family")
    if family in (LTX2, LTX23, LTX25):
        return family
    layers = [k.removeprefix("diffusion_model.") for k in lora.shapes]
    if any(layer.startswith(LTX2_ONLY_LAYERS) for layer in layers):
        return LTX2
    if any(layer.startswith(LTX23_ON_LAYERS[:2]) or LTX23_ON_LAYERS[2] in layer for layer in layers):
        return LTX23
    return None


def check_lora_release(lora_path: str | Path, checkpoint: SafetensorsHeader) -> None:
    """Refuse a LoRA made for another LTX release than the model file's, naming both."""
    lora = read_safetensors_header(lora_path)
    model = detect_model_family(checkpoint.shapes, checkpoint.dtypes, checkpoint.metadata).family
    release = lora_release(lora)
    # A LoRA with LTX-2.3's layers also fits LTX-2.5, which keeps them.
    fits = release is None or release == model or (release == LTX23 and model == LTX25)
    if model not in (LTX2, LTX23, LTX25) or fits:
        return
    raise ValueError(
        f"LoRA {lora.path.name} is for {release} but the model {checkpoint.path.name} is {model}; "
        f"pick a LoRA trained for {model} (or load the {release} model it was made for)"
    )


def check_text_encoder_fits(text_encoder: str | Path, checkpoint: str | Path, is_gemma4: bool) -> None:
    """Refuse a text encoder that cannot condition the model: Gemma 4 on LTX-2 / 2.3, or a Gemma 3 /
    a Gemma 4 without the projection on LTX-2.5 (which has no projection of its own)."""
    header = read_safetensors_header(checkpoint)
    model = detect_model_family(header.shapes, header.dtypes, header.metadata).family
    if model not in TEXT_ENCODER_FOR:
        return
    name, model_name = Path(text_encoder).name, Path(checkpoint).name
    if is_gemma4 and model != LTX25:
        raise ValueError(
            f"{name} is Gemma 4, LTX-2.5's text encoder, but the model {model_name} is {model}; pick "
            f"{TEXT_ENCODER_FOR[model]} in text_encoder"
        )
    if model != LTX25:
        return
    if not is_gemma4:
        raise ValueError(
            f"{name} is not Gemma 4 with the LTX projection, which the model {model_name} (LTX-2.5, no text "
            f"projection of its own) needs; pick {TEXT_ENCODER_FOR[LTX25]} in text_encoder"
        )
    if GEMMA4_PROJECTION_KEY not in read_safetensors_header(text_encoder).shapes:
        raise ValueError(
            f"{name} is Gemma 4 without the LTX projection ({GEMMA4_PROJECTION_KEY}), which the model "
            f"{model_name} (LTX-2.5) needs; pick the 'with-proj' file, {TEXT_ENCODER_FOR[LTX25]}"
        )


def check_vae_is_not_a_checkpoint(model: str | Path, family: str, vae: str | Path, role: str) -> None:
    """Refuse a full LTX checkpoint (transformer and VAEs in one file) picked as the `role` ("video" or
    "audio") VAE of `model`, of release `family`: its VAE is another release's, or already the model's own."""
    if not vae:
        return
    header = read_safetensors_header(vae)
    found = detect_model_family(header.shapes, header.dtypes, header.metadata).family
    if found not in TEXT_ENCODER_FOR:
        return
    name, model_name = Path(vae).name, Path(model).name
    if found != family:
        raise ValueError(
            f"{name} is an {found} checkpoint, not a VAE file, given as the {role} VAE of the {family} model "
            f"{model_name}; {found}'s VAE does not decode {family} latents: pick the {family} {role} VAE"
            + (f" (ltx-2.5-{role}-vae) in {role}_vae_name" if family == LTX25 else f" in {role}_vae_name")
        )
    raise ValueError(
        f"{name} is an {found} checkpoint, given as the {role} VAE of {model_name}; its VAEs are the "
        f"ones inside {model_name} already: set {role}_vae_name to '(from the checkpoint)'"
    )
