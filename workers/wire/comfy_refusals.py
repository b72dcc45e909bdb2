"""The files ComfyUI 0.33's own loaders refuse, told from the header before any worker starts.

NOTE [file metadata] (file_metadata.py) is the rule: what ComfyUI accepts we accept, what it refuses we
refuse too, but first and in one line that names the file, what it is and what to pick, instead of a
traceback from inside a worker. These are the refusals a header shows:
- The transformer (UNETLoader, CheckpointLoaderSimple; comfy/model_detection.py, LTX branch): a
  "config" that is not a JSON object, or whose "transformer" section is not an object (ComfyUI parses
  it and merges that section into the model's settings: json.loads, dict.get, dict.update fail). Then
  the model ComfyUI builds: attention head size from the cross-attention keys (to_k rows / 32), the
  section's numbers over LTXAVModel's defaults (32 heads of 64 for audio, ...). A file whose attention
  widths are not those numbers fails its load_state_dict with size mismatches: a tiny or pruned file
  without its config, or a config that does not describe the weights.
- Separate VAE files (VAELoader): the audio VAE needs its config's "audio_vae" and "vocoder" sections
  (vae/audio_vae.py asserts them); a present "config" must parse; without a "vae" section ComfyUI
  builds its default video VAE (encoder 128 channels at the input; conv decoder 512 or 1024 wide, the
  width picking the version; diffusion decoder 2048 wide at the latent), refused by a file of other widths.
- The latent upscaler (LatentUpscaleModelLoader): needs its config object.
What the header cannot show (a size mismatch deeper in the file) the ranks' load reports, naming
the file, with ComfyUI's own message.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .file_metadata import CONFIG_KEY, parse_json_object
from .model_files import SafetensorsHeader

# comfy/model_detection.py: attention_head_dim = attn2.to_k rows // 32 (the 19B's head count).
DETECTED_HEADS = 32
# LTXAVModel's defaults for what detection does not read (comfy/ldm/lightricks/av_model.py).
COMFY_DEFAULTS = {"num_attention_heads": 32, "audio_num_attention_heads": 32, "audio_attention_head_dim": 64}
_PREFIXES = ("model.diffusion_model.", "")
_REDOWNLOAD = "re-download the file, or pick one whose metadata 'config' describes its weights"


def check_transformer_header(header: SafetensorsHeader) -> None:
    """ValueError (one line: the file, why ComfyUI refuses it, what to do) for a transformer file
    ComfyUI's loaders refuse for what its header says; nothing otherwise."""
    name = header.path.name
    section = _transformer_section(header, name)
    prefix = next(
        (p for p in _PREFIXES if f"{p}transformer_blocks.0.attn2.to_k.weight" in header.shapes), None
    )
    if prefix is None:
        return  # not an LTX transformer ComfyUI detects; the caller names the file's kind
    head_dim = header.shapes[f"{prefix}transformer_blocks.0.attn2.to_k.weight"][0] // DETECTED_HEADS
    settings = {**COMFY_DEFAULTS, "attention_head_dim": head_dim, **section}
    for stream, heads, size, key in (
        ("video", "num_attention_heads", "attention_head_dim", "transformer_blocks.0.attn1.to_q.weight"),
        ("audio", "audio_num_attention_heads", "audio_attention_head_dim", "transformer_blocks.0.audio_attn1.to_q.weight"),
    ):  # fmt: skip
        shape = header.shapes.get(prefix + key)
        built = _product(settings.get(heads), settings.get(size))
        if shape is None or built is None or built == shape[0]:
            continue
        said = "its metadata config says" if heads in section or size in section else "ComfyUI's defaults are"
        raise ValueError(
            f"{name}: ComfyUI 0.33 builds its {stream} attention {settings[heads]} heads x {settings[size]} = "
            f"{built} wide ({said} so), but the file's {stream} layers are {shape[0]} wide "
            f"({prefix}{key} is {list(shape)}), so ComfyUI's own loader refuses it too (size mismatch); "
            f"{_REDOWNLOAD}"
        )


def _transformer_section(header: SafetensorsHeader, name: str) -> Mapping:
    """The "transformer" section ComfyUI merges into the model's settings; {} without a config."""
    if CONFIG_KEY not in header.metadata:
        return {}
    config = parse_json_object(header.metadata[CONFIG_KEY])
    if config is None:
        raise ValueError(
            f"{name}: its metadata 'config' is not a JSON object, which ComfyUI's model detection parses, so "
            f"ComfyUI's own loader refuses the file too; {_REDOWNLOAD}"
        )
    section = config.get("transformer", {})
    if not isinstance(section, Mapping):
        raise ValueError(
            f"{name}: its metadata config's 'transformer' section is {type(section).__name__}, not an object; "
            f"ComfyUI merges that section into the model's settings and refuses the file too; {_REDOWNLOAD}"
        )
    return section


def _product(a: object, b: object) -> int | None:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int) or not isinstance(b, int):
        return None
    return a * b


def check_audio_vae_header(header: SafetensorsHeader) -> None:
    """ValueError for an audio VAE file ComfyUI's VAELoader refuses: its metadata config must hold the
    "audio_vae" and "vocoder" sections the model is built from."""
    config = parse_json_object(header.metadata.get(CONFIG_KEY))
    missing = [s for s in ("audio_vae", "vocoder") if not isinstance((config or {}).get(s), Mapping)]
    if missing:
        have = (
            "no metadata config"
            if config is None
            else f"no {' or '.join(missing)} section in its metadata config"
        )
        raise ValueError(
            f"{header.path.name} is an LTX audio VAE with {have}; ComfyUI builds the audio VAE from those "
            f"sections and refuses the file too: {_REDOWNLOAD}"
        )


# Widths of ComfyUI's default LTX video VAEs (causal_video_autoencoder.VideoVAE.get_default_config,
# na_diffusion_decoder.LTX_24_VAE_CONFIG): key -> (dimension, the widths a default VAE has there).
DEFAULT_VIDEO_VAE_WIDTHS = {
    "encoder.conv_in.conv.weight": (0, (128,)),
    "decoder.up_blocks.0.res_blocks.0.conv1.conv.weight": (0, (512, 1024)),
    "decoder.conv_in.weight": (0, (2048,)),
}


def check_video_vae_header(header: SafetensorsHeader) -> None:
    """ValueError for a video VAE file ComfyUI's VAELoader refuses: a metadata "config" it cannot parse,
    or no "vae" section where the weights are not the default VAE's widths ComfyUI then builds."""
    name = Path(header.path).name
    config = parse_json_object(header.metadata.get(CONFIG_KEY))
    if CONFIG_KEY in header.metadata and config is None:
        raise ValueError(
            f"{name}: its metadata 'config' is not a JSON object, which ComfyUI's VAELoader parses, so it "
            f"refuses the file too; {_REDOWNLOAD}"
        )
    if isinstance((config or {}).get("vae"), Mapping):
        return
    for key, (dim, widths) in DEFAULT_VIDEO_VAE_WIDTHS.items():
        shape = header.shapes.get(key)
        if shape is not None and len(shape) > dim and shape[dim] not in widths:
            raise ValueError(
                f"{name} is an LTX video VAE without a 'vae' section in its metadata config, so ComfyUI builds "
                f"its default VAE ({key} {' or '.join(map(str, widths))} wide) and refuses this file's "
                f"{shape[dim]}-wide weights too (size mismatch); {_REDOWNLOAD}"
            )
