"""Which LTX release a file holds and in which weight format, read from its safetensors header.

Pure standard library (the UI side decides before any worker starts; ranks may check again). Only
the header is parsed, plus the few bytes of one `comfy_quant` entry (ComfyUI's per-layer quantization
record); no tensor is loaded and nothing is unpickled.

The family comes from wire/model_family.py, the rule the loader reports, so the VAE pairing checked
here never disagrees with what the node shows.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .file_info import ModelFileInfo
from .file_kinds import describe_kind
from .file_metadata import QUANTIZATION_KEY, config_section, metadata_config, parse_json_object
from .gguf_files import is_gguf_file
from .model_family import LTX23, LTX25, detect_model_family, release_of_version

DIFFUSION_PREFIX = "model.diffusion_model."
# Headers are a few MB at most for the 22B files (about 4,000 tensors); refuse absurd sizes.
MAX_HEADER_BYTES = 100_000_000
_DTYPE_NAMES = {
    "BF16": "bf16",
    "F16": "fp16",
    "F32": "fp32",
    "F8_E4M3": "fp8",
    "F8_E5M2": "fp8",
    "I8": "int8",
}
_QUANT_FORMATS = {
    "float8_e4m3fn": "fp8 scaled",
    "float8_e5m2": "fp8 scaled",
    "nvfp4": "nvfp4 mixed",
    "mxfp8": "mxfp8 mixed",
    "int8_tensorwise": "int8",
    "convrot_w4a4": "int4 convrot",
}
VIDEO_VAE_DIFFUSION = "LTX-2.5 video VAE (diffusion decoder)"
VIDEO_VAE_CONV = "LTX video VAE (conv decoder)"
AUDIO_VAE = "LTX audio VAE"
# What tells the release of a separate VAE file (NOTE [file metadata] in file_metadata.py):
# - what it states: its `model_version` metadata ("2.5.0"), the release's own statement;
# - what ComfyUI's detection reads: LTX-2.5's video VAE carries the diffusion decoder
#   (`decoder.conv_in_x_t`, built as CausalDiffusionVAE, which no other release has).
# Layouts that only suggest a release are hints, never reasons to refuse (ComfyUI runs them): the
# bandwidth-extension vocoder (`vocoder.vocoder.*` beside `vocoder.bwe_generator.*`, 48 kHz) that
# LTX-2.3 introduced and later files may keep, and the conv decoder's separate space / time blocks
# ("compress_space", "compress_time" in the config's decoder_blocks) of LTX-2.3's video VAE.
LTX23_AUDIO_PREFIXES = ("vocoder.bwe_generator.", "vocoder.vocoder.")
LTX23_DECODER_BLOCKS = ("compress_space", "compress_time")
# ComfyUI's VAE detection keys (comfy/sd.py VAE.__init__), in its order.
_DIFFUSION_DECODER_KEY = "decoder.conv_in_x_t.weight"
_CONV_DECODER_KEY = "decoder.up_blocks.0.res_blocks.0.conv1.conv.weight"
_AUDIO_VOCODER_KEYS = ("vocoder.resblocks.0.convs1.0.weight", "vocoder.vocoder.resblocks.0.convs1.0.weight")


@dataclass(frozen=True)
class VaeRelease:
    """The release of a separate VAE file. `release`: what the file states or ComfyUI's detection sees
    (None: nothing does); `reason`: how that was read. `hint`: a release its layout suggests (LTX-2.3's
    BWE vocoder or decoder blocks), a warning at most; `hint_reason` says which layout."""

    release: str | None
    reason: str = ""
    hint: str | None = None
    hint_reason: str = ""


def read_header(path: str | Path) -> tuple[dict, dict, int]:
    """(tensor entries, __metadata__, data offset) of a safetensors file; ValueError naming the file."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            prefix = f.read(8)
            (size,) = struct.unpack("<Q", prefix) if len(prefix) == 8 else (0,)
            raw = f.read(size) if 0 < size <= MAX_HEADER_BYTES else b""
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    try:
        header = json.loads(raw)
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise ValueError(f"{path} is not a safetensors file (no JSON header); pick a .safetensors model file")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + size


def read_model_file_info(path: str | Path) -> ModelFileInfo:
    """The family and weight format of an LTX transformer file (checkpoint or diffusion model).

    Raises ValueError naming the file when it holds no LTX audio-video transformer."""
    if is_gguf_file(path):
        from .gguf_checks import gguf_model_file_info

        return gguf_model_file_info(path)
    entries, metadata, data_start = read_header(path)
    keys = {k.removeprefix(DIFFUSION_PREFIX): k for k in entries}
    if "audio_adaln_single.linear.weight" not in keys:
        raise ValueError(
            f"{Path(path).name} is {describe_kind(entries)}, not an LTX audio-video transformer; pick an LTX-2, "
            "LTX-2.3 or LTX-2.5 checkpoint (checkpoints/) or diffusion model (diffusion_models/) in ckpt_name"
            + _slot_hint(describe_kind(entries))
        )
    shapes = {key: tuple(entry["shape"]) for key, entry in entries.items()}
    dtypes = {key: entry["dtype"] for key, entry in entries.items()}
    family = detect_model_family(shapes, dtypes, metadata).family
    return ModelFileInfo(
        path=str(path),
        family=family,
        weight_format=_weight_format(path, entries, metadata, data_start),
        video_vae=any(k.startswith("vae.") for k in entries),
        audio_vae=any(k.startswith("audio_vae.") for k in entries),
    )


def _slot_hint(kind: str) -> str:
    if "VAE" in kind:
        return ", and this file in video_vae_name or audio_vae_name"
    if "text encoder" in kind:
        return ", and this file in MGPU Text Encode's text_encoder"
    if "upscaler" in kind:
        return ", and this file in the TDP Upscaler's upscale_model"
    if kind == "a LoRA":
        return ", and this file in lora_name or MGPU LoRA"
    return ""


def _weight_format(path: str | Path, entries: dict, metadata: dict, data_start: int) -> str:
    quant = [k for k in entries if k.endswith(".comfy_quant")]
    if quant:
        return _comfy_quant_format(path, entries[quant[0]], data_start)
    if QUANTIZATION_KEY in metadata:
        layers = config_section(parse_json_object(metadata[QUANTIZATION_KEY]), "layers")
        formats = {str(conf.get("format", "")) for conf in layers.values() if isinstance(conf, dict)}
        return " + ".join(sorted(_QUANT_FORMATS.get(f, f) for f in formats)) or "unknown quantization"
    blocks = [e["dtype"] for k, e in entries.items() if ".transformer_blocks." in k and k.endswith(".weight")]
    if any(k.endswith(".weight_scale") for k in entries) and "F8_E4M3" in blocks:
        return "fp8 scaled"
    dtype = Counter(blocks).most_common(1)[0][0] if blocks else "unknown"
    return _DTYPE_NAMES.get(dtype, dtype.lower())


def _comfy_quant_format(path: str | Path, entry: dict, data_start: int) -> str:
    begin, end = entry["data_offsets"]
    with Path(path).open("rb") as f:
        f.seek(data_start + begin)
        raw = f.read(end - begin)
    try:
        conf = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "quantized"
    if not isinstance(conf, dict):
        return "quantized"
    params = conf.get("params")
    name = _QUANT_FORMATS.get(conf.get("format", ""), conf.get("format", "quantized"))
    if conf.get("format") == "int8_tensorwise" and (
        conf.get("convrot") or (isinstance(params, dict) and params.get("convrot"))
    ):
        return "int8 convrot"
    return name


def is_gemma4_file(path: str | Path) -> bool:
    """Whether a text-encoder file is Gemma 4 (LTX-2.5's encoder): its layers carry a `layer_scalar`,
    which Gemma 3's do not. False for files that are not safetensors (the caller's checks name them)."""
    try:
        entries, _metadata, _ = read_header(path)
    except ValueError:
        return False
    return any(k.startswith("model.layers.") and k.endswith(".layer_scalar") for k in entries)


def read_vae_kind(path: str | Path) -> str:
    """VIDEO_VAE_DIFFUSION, VIDEO_VAE_CONV or AUDIO_VAE for a separate VAE file, by the keys ComfyUI's
    VAE detection reads; ValueError naming the file and what it holds otherwise."""
    entries, _metadata, _ = read_header(path)
    if _DIFFUSION_DECODER_KEY in entries:
        return VIDEO_VAE_DIFFUSION
    if _CONV_DECODER_KEY in entries:
        return VIDEO_VAE_CONV
    if any(key in entries for key in _AUDIO_VOCODER_KEYS):
        return AUDIO_VAE
    raise ValueError(
        f"{Path(path).name} is {describe_kind(entries)}, not an LTX VAE (no LTX video decoder or audio "
        "vocoder weights); pick the release's video or audio VAE file from models/vae"
    )


def read_vae_release(path: str | Path) -> VaeRelease:
    """What tells the release of a separate VAE file (see VaeRelease and the note above)."""
    kind = read_vae_kind(path)
    entries, metadata, _ = read_header(path)
    stated = release_of_version(metadata)
    hint, hint_reason = None, ""
    if kind == AUDIO_VAE and any(k.startswith(LTX23_AUDIO_PREFIXES) for k in entries):
        hint, hint_reason = LTX23, "its vocoder has the bandwidth extension LTX-2.3 introduced"
    elif kind == VIDEO_VAE_CONV:
        vae = config_section(metadata_config(metadata), "vae")
        blocks = vae.get("decoder_blocks")
        names = {b[0] for b in blocks if isinstance(b, list) and b} if isinstance(blocks, list) else set()
        if names & set(LTX23_DECODER_BLOCKS):
            hint, hint_reason = LTX23, "its decoder upsamples space and time apart, as LTX-2.3's does"
    if stated is not None:
        return VaeRelease(stated, f"its model_version metadata names {stated}", hint, hint_reason)
    if kind == VIDEO_VAE_DIFFUSION:
        return VaeRelease(LTX25, "it has LTX-2.5's diffusion decoder", hint, hint_reason)
    return VaeRelease(None, "", hint, hint_reason)


def check_vae_files(info: ModelFileInfo, video_vae: str, audio_vae: str) -> list[str]:
    """Refuse VAE files that do not fit the transformer, naming both files and what would fit; return
    warnings (one line each) where only a layout hints at another release."""
    name = Path(info.path).name
    if video_vae and read_vae_kind(video_vae) == AUDIO_VAE:
        raise ValueError(
            f"{Path(video_vae).name} is an audio VAE but was given as the video VAE of {name}; "
            "pick the video VAE file (for LTX-2.5: ltx-2.5-video-vae) in video_vae_name"
        )
    if audio_vae and read_vae_kind(audio_vae) != AUDIO_VAE:
        raise ValueError(
            f"{Path(audio_vae).name} is a video VAE, not an audio VAE (given as the audio VAE of {name}); pick "
            "the release's audio VAE file (for LTX-2.5: ltx-2.5-audio-vae) in audio_vae_name"
        )
    warnings = []
    for role, vae in (("video", video_vae), ("audio", audio_vae)):
        if not vae:
            continue
        found = read_vae_release(vae)
        if found.release is not None and found.release != info.family:
            raise ValueError(
                f"{Path(vae).name} is an {found.release} {role} VAE ({found.reason}) but {name} is an "
                f"{info.family} transformer; {found.release}'s VAE does not fit {info.family} latents: "
                f"{_fitting_vae(info.family, role)}"
            )
        if found.release is None and found.hint not in (None, info.family):
            warnings.append(
                f"{Path(vae).name} may be an {found.hint} {role} VAE ({found.hint_reason}) while {name} is "
                f"{info.family}; used as given (ComfyUI runs it too). If the result looks wrong, "
                f"{_fitting_vae(info.family, role)}"
            )
    if info.family == LTX25 and not (video_vae or info.video_vae):
        raise ValueError(
            f"{name} is an LTX-2.5 diffusion model without a video VAE; choose its video VAE file "
            "(ltx-2.5-video-vae) in video_vae_name"
        )
    return warnings


def check_stated_release(info: ModelFileInfo, metadata: dict) -> list[str]:
    """A warning when the transformer's `model_version` metadata names another release than ComfyUI's
    detection reads from its weights and config (what runs is what ComfyUI builds)."""
    stated = release_of_version(metadata)
    if stated is None or stated == info.family:
        return []
    return [
        f"{Path(info.path).name}'s model_version metadata names {stated} but its weights "
        f"and config are {info.family}'s; it runs as ComfyUI builds it, {info.family}"
    ]


def _fitting_vae(family: str, role: str) -> str:
    if family == LTX25:
        return f"pick LTX-2.5's {role} VAE file (ltx-2.5-{role}-vae) in {role}_vae_name"
    return (
        f"use the {role} VAE that ships with {family} ({role}_vae_name '(from the checkpoint)' for a "
        f"single-file checkpoint, or {family}'s own {role} VAE file)"
    )
