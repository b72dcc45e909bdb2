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

from .gguf_files import is_gguf_file
from .model_family import LTX23, LTX25, detect_model_family

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
# What tells the release of a separate VAE file, in what ComfyUI builds the VAE from (comfy/sd.py VAE):
# - LTX-2.5's video VAE carries the diffusion decoder (`decoder.conv_in_x_t`).
# - LTX-2.3's audio ends in the 48 kHz vocoder with bandwidth extension: the vocoder is wrapped, its
#   keys `vocoder.vocoder.*` beside `vocoder.bwe_generator.*` (comfy's LTX audio VAE builds the
#   extension only then); LTX-2's and LTX-2.5's vocoders have neither.
# - LTX-2.3's conv video decoder upsamples space and time in separate blocks ("compress_space",
#   "compress_time" in the metadata config's decoder_blocks, the config ComfyUI's VideoVAE is built
#   from); LTX-2's and LTX-2.5's conv decoders use "compress_all" only, so those two are not told apart.
LTX23_AUDIO_PREFIXES = ("vocoder.bwe_generator.", "vocoder.vocoder.")
LTX23_DECODER_BLOCKS = ("compress_space", "compress_time")


@dataclass(frozen=True)
class ModelFileInfo:
    """What a model file holds. `weight_format` names the transformer's storage ("bf16", "fp8 scaled",
    "int8 convrot", "nvfp4 mixed", ...); `video_vae` / `audio_vae` whether the file carries them
    (single-file checkpoints do; LTX-2.5's diffusion-model file does not)."""

    path: str
    family: str
    weight_format: str
    video_vae: bool
    audio_vae: bool

    def describe(self) -> str:
        parts = [f"{self.family} transformer, {self.weight_format}"]
        if self.video_vae or self.audio_vae:
            parts.append(
                "with its "
                + " and ".join(
                    k for k, on in (("video VAE", self.video_vae), ("audio VAE", self.audio_vae)) if on
                )
            )
        else:
            parts.append("diffusion model only (VAEs in separate files)")
        return f"{Path(self.path).name}: " + ", ".join(parts)


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
            f"{path} holds no LTX audio-video transformer (no audio_adaln_single weights); pick an LTX-2, "
            "LTX-2.3 or LTX-2.5 checkpoint (checkpoints/) or diffusion model (diffusion_models/)"
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


def _weight_format(path: str | Path, entries: dict, metadata: dict, data_start: int) -> str:
    quant = [k for k in entries if k.endswith(".comfy_quant")]
    if quant:
        return _comfy_quant_format(path, entries[quant[0]], data_start)
    if "_quantization_metadata" in metadata:
        layers = json.loads(metadata["_quantization_metadata"]).get("layers", {})
        formats = {conf.get("format", "") for conf in layers.values()}
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
        conf = json.loads(f.read(end - begin))
    name = _QUANT_FORMATS.get(conf.get("format", ""), conf.get("format", "quantized"))
    if conf.get("format") == "int8_tensorwise" and (
        conf.get("convrot") or conf.get("params", {}).get("convrot")
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
    """VIDEO_VAE_DIFFUSION, VIDEO_VAE_CONV or AUDIO_VAE for a separate VAE file; ValueError otherwise."""
    entries, _metadata, _ = read_header(path)
    if "decoder.conv_in_x_t.weight" in entries:
        return VIDEO_VAE_DIFFUSION
    if "decoder.up_blocks.0.res_blocks.0.conv1.conv.weight" in entries:
        return VIDEO_VAE_CONV
    if any(k.startswith(("vocoder.", "audio_vae.")) for k in entries):
        return AUDIO_VAE
    raise ValueError(
        f"{path} is not an LTX VAE (no LTX video decoder or audio VAE weights); pick the release's "
        "video or audio VAE file from models/vae"
    )


def read_vae_release(path: str | Path) -> str | None:
    """The LTX release a separate VAE file belongs to when its layout tells (LTX23 or LTX25); None
    when it is a layout LTX-2 and LTX-2.5 share (the conv video decoder, the plain vocoder)."""
    kind = read_vae_kind(path)
    if kind == VIDEO_VAE_DIFFUSION:
        return LTX25
    entries, metadata, _ = read_header(path)
    if kind == AUDIO_VAE:
        return LTX23 if any(k.startswith(LTX23_AUDIO_PREFIXES) for k in entries) else None
    try:
        config = json.loads(metadata.get("config", "{}"))
    except ValueError:
        return None
    vae = config.get("vae") if isinstance(config, dict) else None
    blocks = vae.get("decoder_blocks", []) if isinstance(vae, dict) else []
    names = {block[0] for block in blocks if isinstance(block, list) and block}
    return LTX23 if names & set(LTX23_DECODER_BLOCKS) else None


def check_vae_files(info: ModelFileInfo, video_vae: str, audio_vae: str) -> None:
    """Refuse VAE files that do not fit the transformer, naming both files and what would fit."""
    name = Path(info.path).name
    if video_vae and read_vae_kind(video_vae) == AUDIO_VAE:
        raise ValueError(
            f"{Path(video_vae).name} is an audio VAE but was given as the video VAE of {name}; "
            "pick the video VAE file (for LTX-2.5: ltx-2.5-video-vae) in video_vae_name"
        )
    if audio_vae and read_vae_kind(audio_vae) != AUDIO_VAE:
        raise ValueError(
            f"{Path(audio_vae).name} is not an audio VAE (given as the audio VAE of {name}); pick the "
            "release's audio VAE file (for LTX-2.5: ltx-2.5-audio-vae) in audio_vae_name"
        )
    for role, vae in (("video", video_vae), ("audio", audio_vae)):
        release = read_vae_release(vae) if vae else None
        if release is not None and release != info.family:
            raise ValueError(
                f"{Path(vae).name} is an {release} {role} VAE but {name} is an {info.family} transformer; "
                f"{release}'s VAE does not fit {info.family} latents: {_fitting_vae(info.family, role)}"
            )
    if info.family == LTX25 and not (video_vae or info.video_vae):
        raise ValueError(
            f"{name} is an LTX-2.5 diffusion model without a video VAE; choose its video VAE file "
            "(ltx-2.5-video-vae) in video_vae_name"
        )


def _fitting_vae(family: str, role: str) -> str:
    if family == LTX25:
        return f"pick LTX-2.5's {role} VAE file (ltx-2.5-{role}-vae) in {role}_vae_name"
    return (
        f"use the {role} VAE that ships with {family} ({role}_vae_name '(from the checkpoint)' for a "
        f"single-file checkpoint, or {family}'s own {role} VAE file)"
    )
